#include "tokenizer/pretokenize.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tokenizer/unicode.h"

namespace ll3 {

const char* const kLlama3SplitRegex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// The same regex with \s spelled out as the Unicode White_Space property, which is what the
// reference engines (Oniguruma in HF tokenizers, llama.cpp's tables) use. PCRE2's \s also
// matches U+180E (MONGOLIAN VOWEL SEPARATOR, no longer a space since Unicode 6.3).
#define LL3_WS           \
  "\\t\\n\\x{0B}\\f\\r " \
  "\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
static const char* const kPattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^" LL3_WS
    "\\p{L}\\p{N}]+[\\r\\n]*|[" LL3_WS "]*[\\r\\n]+|[" LL3_WS "]+(?![^" LL3_WS "])|[" LL3_WS "]+";
#undef LL3_WS

Result<std::unique_ptr<PreTokenizer>> PreTokenizer::create() {
  std::unique_ptr<PreTokenizer> p(new PreTokenizer());
  int err = 0;
  PCRE2_SIZE err_off = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern), PCRE2_ZERO_TERMINATED,
                    PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &err, &err_off, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    return Status::errorf("tokenizer: split regex does not compile at %zu: %s", size_t(err_off),
                          reinterpret_cast<const char*>(msg));
  }
  p->code_ = code;
  p->jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;  // the interpreter is the fallback
  return p;
}

PreTokenizer::~PreTokenizer() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

namespace {
// Per-thread match state, so split() allocates nothing after the first call on a thread.
struct MatchState {
  pcre2_match_data* md = nullptr;
  pcre2_jit_stack* stack = nullptr;
  pcre2_match_context* ctx = nullptr;
  MatchState() {
    md = pcre2_match_data_create(1, nullptr);
    // Single-character repeats keep the JIT stack small, but give it room for long inputs.
    stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr);
    ctx = pcre2_match_context_create(nullptr);
    if (ctx && stack) pcre2_jit_stack_assign(ctx, nullptr, stack);
  }
  ~MatchState() {
    pcre2_match_context_free(ctx);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(md);
  }
};
}  // namespace

void PreTokenizer::split(std::string_view text, std::vector<std::pair<uint32_t, uint32_t>>& out,
                         uint32_t base) const {
  thread_local MatchState st;
  auto* code = static_cast<pcre2_code*>(code_);
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const size_t n = text.size();
  size_t pos = 0;
  while (pos < n) {
    // NO_UTF_CHECK: the caller guarantees valid UTF-8; checking on every call would make a
    // long text quadratic.
    int rc = jit_ ? pcre2_jit_match(code, subject, n, pos, PCRE2_NO_UTF_CHECK, st.md, st.ctx)
                  : pcre2_match(code, subject, n, pos, PCRE2_NO_UTF_CHECK, st.md, st.ctx);
    size_t b, e;
    if (rc > 0) {
      PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.md);
      b = ov[0];
      e = ov[1];
    } else {
      b = e = n;  // no match (or a resource limit): the rest is one piece
    }
    // Unmatched text between matches stays a piece of its own (the "Isolated" split keeps it).
    if (b > pos) out.emplace_back(uint32_t(base + pos), uint32_t(base + b));
    if (e > b) {
      out.emplace_back(uint32_t(base + b), uint32_t(base + e));
      pos = e;
    } else if (b < n) {
      // Empty match (cannot happen with this regex): step over one character.
      size_t step = 1;
      while (b + step < n && (uint8_t(text[b + step]) & 0xC0) == 0x80) ++step;
      out.emplace_back(uint32_t(base + b), uint32_t(base + b + step));
      pos = b + step;
    } else {
      pos = n;
    }
  }
}

void sanitize_utf8(std::string_view s, std::string& out, std::string& regex_safe) {
  out.clear();
  regex_safe.clear();
  out.reserve(s.size() + 16);
  regex_safe.reserve(s.size() + 16);
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    // llama.cpp's lenient decoder: the lead byte fixes the length, continuation bytes are only
    // checked for their 10xxxxxx form (so overlongs and surrogates decode).
    uint8_t c = p[i];
    uint32_t cp = 0xFFFD;
    size_t len = 1;
    auto cont = [&](size_t k) { return i + k < n && (p[i + k] & 0xC0) == 0x80; };
    if (c < 0x80) {
      cp = c;
    } else if ((c & 0xE0) == 0xC0) {
      if (cont(1)) cp = ((c & 0x1F) << 6) | (p[i + 1] & 0x3F), len = 2;
    } else if ((c & 0xF0) == 0xE0) {
      if (cont(1) && cont(2))
        cp = ((c & 0x0F) << 12) | ((p[i + 1] & 0x3F) << 6) | (p[i + 2] & 0x3F), len = 3;
    } else if ((c & 0xF8) == 0xF0) {
      if (cont(1) && cont(2) && cont(3)) {
        cp = ((c & 0x07) << 18) | ((p[i + 1] & 0x3F) << 12) | ((p[i + 2] & 0x3F) << 6) |
             (p[i + 3] & 0x3F);
        len = 4;
        if (cp > 0x10FFFF) cp = 0xFFFD;  // llama.cpp throws here; a replacement is the sane reading
      }
    }
    i += len;
    append_utf8(out, cp);
    append_utf8(regex_safe, (cp >= 0xD800 && cp <= 0xDFFF) ? 0xE000 : cp);
  }
}

}  // namespace ll3
