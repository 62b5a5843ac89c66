// llama.cpp's tokenizer as a third reference (prebuilt llama.cpp through node-llama-cpp, CPU only):
// writes tests/fixtures/tokenizer/encode_llamacpp.jsonl, and with --bench FILE measures its speed.
//
//   cd scripts/tokenizer-fixtures/llamacpp && npm ci && node gen_llamacpp.mjs [--bench corpus.txt]
//
// It covers what the JavaScript references get wrong: JavaScript's \s has no U+0085 and has
// U+FEFF, unlike the Unicode White_Space set that llama.cpp and HF tokenizers (Oniguruma) use.
import { getLlama } from "node-llama-cpp";
import fs from "node:fs";
import path from "node:path";
import { rng } from '../prng.mjs';

const here = path.dirname(new URL(import.meta.url).pathname);
const outDir = path.resolve(here, "../../../tests/fixtures/tokenizer");
const gguf = process.env.LL3_GGUF || path.resolve(here, "../../../../shared/models/tiny-llama3-f32.gguf");

const llama = await getLlama({ gpu: false, build: "never" });
const model = await llama.loadModel({ modelPath: gguf });
const enc = (t, special) => Array.from(model.tokenize(t, special));

const benchAt = process.argv.indexOf("--bench");
if (benchAt > 0) {
  const text = fs.readFileSync(process.argv[benchAt + 1], "utf8");
  const bytes = Buffer.byteLength(text, "utf8");
  for (let r = 0; r < 3; r++) {
    const t0 = performance.now();
    const n = model.tokenize(text).length;
    const s = (performance.now() - t0) / 1000;
    console.log(`llama.cpp run ${r + 1}: ${bytes} bytes -> ${n} tokens in ${s.toFixed(3)} s: ${(bytes / 1e6 / s).toFixed(2)} MB/s`);
  }
  process.exit(0);
}

const cases = [
  ["nel_before_contraction", "a\u0085'tb \u0085\u0085x \n\u0085't"],
  ["bom_before_letters", "\uFEFFabc \uFEFF\uFEFFdef x\uFEFF"],
  ["mongolian_vowel_separator", "x\u180Eabc \u180E\u180E 1"],
  ["long_s_contraction", "it'ſ 'ſt 'S 'ſ"],
  ["kelvin_and_friends", "'\u212A 'K 'k \u212Aelvin"],
  ["all_unicode_spaces", "a\u0009\u000B\u000C\u0020\u0085\u00A0\u1680\u2000\u2005\u200A\u2028\u2029\u202F\u205F\u3000b"],
  ["spaces_then_newline", " \u00A0\u3000\n\u2028x"],
  ["specials", "<|begin_of_text|>a<|eot_id|>\n<|start_header_id|>user<|end_header_id|>"],
];
const pieces = ["\u0085", "\uFEFF", "\u180E", "\u00A0", "\u2028", "\u3000", "'s", "'S", "'ſ", "'t", "ſ", " ", "  ", "\n", "\r\n", "\t",
  "abc", "Ünïcödé", "日本", "١٢٣", "42", "12345", ".", "!?", "<|eot_id|>", "x", "é", "\u0301", "😀", "👨‍👩", "'", "-"];
const r = rng(4242);
for (let i = 0; i < 1500; i++) {
  let s = "";
  const n = 1 + Math.floor(r() * 16);
  for (let k = 0; k < n; k++) s += pieces[Math.floor(r() * pieces.length)];
  cases.push([`llamacpp_random_${i}`, s]);
}
const lines = cases.map(([name, text]) => JSON.stringify({ name, text, ids: enc(text, true), ids_plain: enc(text, false) }));
fs.writeFileSync(path.join(outDir, "encode_llamacpp.jsonl"), lines.join("\n") + "\n");
console.log(`encode_llamacpp.jsonl: ${lines.length} cases`);
process.exit(0);
