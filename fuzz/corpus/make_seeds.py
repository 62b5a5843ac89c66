#!/usr/bin/env python3
"""Writes the seed corpora for the parser fuzzers: small, valid inputs that reach deep into each
parser (every GGUF metadata type, nested arrays, alignment, several tensor types; safetensors
with metadata and several dtypes; a byte-level BPE tokenizer.json with specials, merges in both
formats and a chat template; Jinja templates using loops, filters, namespaces and tool calls;
tokenizer round-trip texts, each a flag byte then the text). Run from anywhere; the outputs are committed, so this is only
needed when the seeds should change. Standard library only."""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

# GGUF value type ids.
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
SCALAR_FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
              BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}
# ggml tensor type ids and (block elements, block bytes).
T_F32, T_F16, T_Q4_0, T_Q8_0, T_BF16 = 0, 1, 2, 8, 30
BLOCK = {T_F32: (1, 4), T_F16: (1, 2), T_Q4_0: (32, 18), T_Q8_0: (32, 34), T_BF16: (1, 2)}


def gguf_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def gguf_value(vtype, v):
    if vtype == STRING:
        return gguf_string(v)
    if vtype == ARRAY:
        etype, items = v
        out = struct.pack("<IQ", etype, len(items))
        for it in items:
            out += gguf_value(etype, it)
        return out
    return struct.pack(SCALAR_FMT[vtype], v)


def gguf_file(version, kvs, tensors, alignment=32):
    """kvs: [(key, type, value)]; tensors: [(name, type, dims)] with dims innermost first."""
    out = b"GGUF" + struct.pack("<I", version) + struct.pack("<QQ", len(tensors), len(kvs))
    for key, vtype, v in kvs:
        out += gguf_string(key) + struct.pack("<I", vtype) + gguf_value(vtype, v)
    offset, datas = 0, []
    for name, ttype, dims in tensors:
        n = 1
        for d in dims:
            n *= d
        blk, nbytes = BLOCK[ttype]
        size = n // blk * nbytes
        out += gguf_string(name) + struct.pack("<I", len(dims))
        out += b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", ttype, offset)
        # Deterministic non-zero bytes (the parser never interprets them).
        datas.append((offset, bytes((i * 37 + len(name)) & 0xFF for i in range(size))))
        offset += (size + alignment - 1) // alignment * alignment
    out += b"\0" * (-len(out) % alignment)
    data = bytearray(offset)
    for off, d in datas:
        data[off:off + len(d)] = d
    return out + bytes(data)


def gguf_seeds():
    every_type = [
        ("general.architecture", STRING, "llama"),
        ("general.name", STRING, "seed \u00e9\u4e2d"),
        ("general.alignment", U32, 32),
        ("t.u8", U8, 200), ("t.i8", I8, -7), ("t.u16", U16, 60000), ("t.i16", I16, -300),
        ("t.u32", U32, 4000000000), ("t.i32", I32, -123456), ("t.f32", F32, 0.5),
        ("t.bool", BOOL, True), ("t.u64", U64, 2**63 + 5), ("t.i64", I64, -(2**40)),
        ("t.f64", F64, 1e-300),
        ("t.arr_i32", ARRAY, (I32, [1, -2, 3, -4])),
        ("t.arr_f32", ARRAY, (F32, [0.25, -1.5])),
        ("t.arr_bool", ARRAY, (BOOL, [True, False, True])),
        ("t.arr_u64", ARRAY, (U64, [1, 2**40])),
        ("t.arr_str", ARRAY, (STRING, ["a", "", "\u00fcber"])),
        ("t.arr_nested", ARRAY, (ARRAY, [(I16, [1, 2]), (STRING, ["x"]), (ARRAY, [(U8, [9])])])),
        ("t.arr_empty", ARRAY, (F64, [])),
    ]
    tensors = [("token_embd.weight", T_F32, [4, 3]), ("blk.0.attn_q.weight", T_F16, [8, 2]),
               ("blk.0.ffn_up.weight", T_BF16, [2, 2, 2]), ("q8", T_Q8_0, [32, 2]),
               ("q4", T_Q4_0, [64])]
    llama = [
        ("general.architecture", STRING, "llama"),
        ("llama.block_count", U32, 2), ("llama.context_length", U32, 256),
        ("llama.embedding_length", U32, 8), ("llama.feed_forward_length", U32, 16),
        ("llama.attention.head_count", U32, 2), ("llama.attention.head_count_kv", U32, 1),
        ("llama.rope.freq_base", F32, 500000.0),
        ("llama.attention.layer_norm_rms_epsilon", F32, 1e-5),
        ("tokenizer.ggml.model", STRING, "gpt2"), ("tokenizer.ggml.pre", STRING, "llama-bpe"),
        ("tokenizer.ggml.tokens", ARRAY, (STRING, ["a", "b", "ab", "<|eot_id|>"])),
        ("tokenizer.ggml.token_type", ARRAY, (I32, [1, 1, 1, 3])),
        ("tokenizer.ggml.merges", ARRAY, (STRING, ["a b"])),
        ("tokenizer.ggml.eos_token_id", U32, 3),
    ]
    llama_tensors = [("token_embd.weight", T_F32, [8, 4]), ("output_norm.weight", T_F32, [8]),
                     ("blk.0.attn_norm.weight", T_F32, [8]), ("rope_freqs.weight", T_F32, [2])]
    return {
        "v3_every_type.gguf": gguf_file(3, every_type, tensors),
        "v2_minimal.gguf": gguf_file(2, [("general.architecture", STRING, "llama")],
                                     [("w", T_F32, [16])]),
        "v3_align64.gguf": gguf_file(3, [("general.alignment", U32, 64)],
                                     [("a", T_F16, [5]), ("b", T_F32, [3, 1, 1, 2])], alignment=64),
        "v3_llama.gguf": gguf_file(3, llama, llama_tensors),
        "v3_empty.gguf": gguf_file(3, [], []),
    }


def safetensors_file(tensors, metadata=None):
    """tensors: [(name, dtype, shape, element bytes)]"""
    header, offset, data = {}, 0, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, esize in tensors:
        n = esize
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        data += bytes((i * 13 + 1) & 0xFF for i in range(n))
        offset += n
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def safetensors_seeds():
    return {
        "mixed.safetensors": safetensors_file(
            [("model.embed_tokens.weight", "F32", [4, 3], 4),
             ("model.layers.0.self_attn.q_proj.weight", "F16", [2, 2], 2),
             ("model.norm.weight", "BF16", [3], 2), ("scalar", "F32", [], 4),
             ("empty", "F16", [0, 4], 2)],
            metadata={"format": "pt"}),
        "single.safetensors": safetensors_file([("w", "F32", [2], 4)]),
        "empty.safetensors": safetensors_file([]),
    }


# The Llama-3 pre-tokenizer split, as Hugging Face's tokenizer.json spells it.
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def byte_level_alphabet():
    """GPT-2 byte-to-unicode map: printable bytes map to themselves, the rest to U+0100 on."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    out, n = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + n)
            n += 1
    return out


def tokenizer_json(with_config, template=None, merges_as_pairs=False):
    alpha = byte_level_alphabet()
    vocab = {alpha[b]: b for b in range(256)}
    merges = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("in", "g"), ("Ġ", "a"),
              ("e", "r"), ("Ċ", "Ċ"), ("1", "2")]
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                "<|end_header_id|>", "<|eot_id|>"]
    added = [{"id": len(vocab) + i, "content": t, "special": True, "single_word": False,
              "lstrip": False, "rstrip": False, "normalized": False}
             for i, t in enumerate(specials)]
    added.append({"id": len(vocab) + len(specials), "content": "<user_word>", "special": False})
    tj = {
        "version": "1.0",
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": LLAMA3_SPLIT}, "behavior": "Isolated",
             "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
             "use_regex": False}]},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}]},
        "decoder": {"type": "ByteLevel"},
        "model": {"type": "BPE", "ignore_merges": True, "vocab": vocab,
                  "merges": [[a, b] for a, b in merges] if merges_as_pairs
                  else [a + " " + b for a, b in merges]},
    }
    out = json.dumps(tj, ensure_ascii=False).encode()
    if with_config:
        cfg = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>",
               "add_bos_token": True, "chat_template": template or LLAMA3_TEMPLATE}
        out += b"\0" + json.dumps(cfg, ensure_ascii=False).encode()
    return out


# Written for these seeds in the shape of the Llama-3 instruct format.
LLAMA3_TEMPLATE = (
    "{{- bos_token }}{% for m in messages %}"
    "{{- '<|start_header_id|>' + m['role'] + '<|end_header_id|>\\n\\n' + m['content'] | trim"
    " + '<|eot_id|>' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{% endif %}")

TEMPLATES = {
    "llama3.jinja": LLAMA3_TEMPLATE,
    "tools.jinja": (
        "{%- set ns = namespace(sys='', n=0) -%}\n"
        "{%- if messages[0].role == 'system' %}{% set ns.sys = messages[0].content | trim %}"
        "{% endif -%}\n"
        "{{ bos_token }}System: {{ ns.sys }}\n"
        "{%- if tools is defined and tools %}\nTools: {{ tools | tojson(indent=2) }}{% endif %}\n"
        "{%- for m in messages[1:] %}\n"
        "  {%- if m.tool_calls is defined %}{% for c in m.tool_calls %}"
        "{{ c.function.name }}({{ c.function.arguments | tojson }}){% endfor %}\n"
        "  {%- elif m.role == 'tool' %}[tool] {{ m.content if m.content is string "
        "else m.content | tojson }}\n"
        "  {%- else %}{{ m.role | upper }}: {{ m.content }}{% set ns.n = ns.n + 1 %}\n"
        "  {%- endif %}\n"
        "{%- endfor %}\n"
        "{{ ns.n }} turns; {{ builtin_tools | join(', ') }}; "
        "{{ strftime_now('%d %b %Y') }}"),
    "filters.jinja": (
        "{% for x in [3, 1, 2] | sort | reverse %}{{ loop.index }}:{{ x }}"
        "{{ ',' if not loop.last }}{% endfor %}|"
        "{{ 'a-b-c'.split('-') | map('upper') | join }}|{{ range(5) | select('odd') | list }}|"
        "{{ {'b': 1, 'a': 2} | dictsort }}|{{ '%05.1f' | format(3.14159) if false else 7 // 2 }}|"
        "{{ messages | selectattr('role', 'equalto', 'user') | list | length }}|"
        "{{ (none | default('d')) ~ ('x' * 3) }}|{{ 'Title me' | title }}|{{ -2.5 | abs | round }}"
        "{% for i in range(10) %}{% if i == 3 %}{% continue %}{% endif %}"
        "{% if i > 5 %}{% break %}{% endif %}{{ i }}{% endfor %}"),
    "raise.jinja": (
        "{% if messages | length > 100 %}{{ raise_exception('too many') }}{% endif %}"
        "{% set a = messages[0]['content'] %}{{ a[1:-1] }}{{ a is defined and a is not none }}"
        "{% generation %}{{ 'gen' }}{% endgeneration %}"),
}

ROUNDTRIP = {
    "english.txt": b"\x00Hello world! The quick brown fox isn't 12345 years old.\n\n  ok",
    "bos_special.txt": b"\x03<|begin_of_text|>hi<|eot_id|> <|start_header_id|>user",
    "special_as_text.txt": b"\x00<|eot_id|> is plain text here",
    "multilingual.txt": "\x02caf\u00e9 \u4e2d\u6587 \u65e5\u672c\u8a9e \u041f\u0440\u0438\u0432\u0435\u0442"
                        " \U0001F600\u200d \u00a0\u3000 \u0301x".encode(),
    "invalid_utf8.txt": b"\x01ab\xff\xc3(\xe2\x82 \xf0\x9f\x98 end\x80",
    "whitespace_digits.txt": b"\x00\t\t  \r\n\r\n 1234567 3.14159 ->::{}()   \n",
}


def lora_file_seeds():
    """fuzz_lora_file: a flag byte (0: GGUF adapter, 1: PEFT), then the GGUF file, or the
    adapter_config.json text, a NUL and adapter_model.safetensors."""
    meta = [("general.architecture", STRING, "llama"), ("general.type", STRING, "adapter"),
            ("adapter.type", STRING, "lora"), ("adapter.lora.alpha", F32, 16.0)]
    pairs = [("blk.0.attn_q.weight", 64, 64), ("blk.0.ffn_down.weight", 192, 64), ("blk.1.attn_k.weight", 64, 32),
             ("output.weight", 64, 128)]
    tensors = []
    for name, n_in, n_out in pairs:
        tensors += [(name + ".lora_a", T_F32, [n_in, 4]), (name + ".lora_b", T_F16, [4, n_out])]
    cfg = {"peft_type": "LORA", "r": 4, "lora_alpha": 8, "use_rslora": True, "bias": "none",
           "target_modules": ["q_proj", "down_proj", "lm_head"], "rank_pattern": {"down_proj": 4},
           "alpha_pattern": {"q_proj": 16}}
    st = []
    for module, n_in, n_out in [("model.layers.0.self_attn.q_proj", 64, 64), ("model.layers.1.mlp.down_proj", 192, 64),
                                ("lm_head", 64, 128)]:
        st += [("base_model.model." + module + ".lora_A.weight", "F32", [4, n_in], 4),
               ("base_model.model." + module + ".lora_B.weight", "BF16", [n_out, 4], 2)]
    return {"gguf_adapter": b"\x00" + gguf_file(3, meta, tensors),
            "peft_adapter": b"\x01" + json.dumps(cfg).encode() + b"\x00" + safetensors_file(st, {"format": "pt"})}


def write(subdir, files):
    d = os.path.join(HERE, subdir)
    os.makedirs(d, exist_ok=True)
    for name, blob in files.items():
        assert len(blob) < 64 * 1024, name
        with open(os.path.join(d, name), "wb") as f:
            f.write(blob)


if __name__ == "__main__":
    write("gguf", gguf_seeds())
    write("safetensors", safetensors_seeds())
    write("tokenizer_json", {"bpe.json": tokenizer_json(False),
                             "bpe_pairs.json": tokenizer_json(False, merges_as_pairs=True),
                             "bpe_config.json": tokenizer_json(True),
                             "bpe_tools_template.json": tokenizer_json(True, TEMPLATES["tools.jinja"])})
    write("tokenizer_template", {k: v.encode() for k, v in TEMPLATES.items()})
    write("tokenizer_roundtrip", ROUNDTRIP)
    write("lora_file", lora_file_seeds())
