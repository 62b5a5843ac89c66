// ll3 tokenize / detokenize / template: the tokenizer and chat templates from the command line.
//   ll3 tokenize -m MODEL --text "Hello" [--ids] [--parse-special] [--add-bos]
//   ll3 tokenize --tokenizer DIR --jsonl in.jsonl        ({"text": ...} -> {"ids": [...]} per line)
//   ll3 detokenize -m MODEL --ids 9906,1917
//   ll3 template -m MODEL --messages chat.json [--no-generation-prompt]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_args.h"
#include "commands.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace ll3::cli {
namespace {

using json = nlohmann::json;

bool read_input(const std::string& path, std::string* out) {
  if (path == "-") {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    *out = ss.str();
    return true;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return !in.bad();
}

// JSON text of arbitrary bytes (invalid UTF-8 shown as U+FFFD).
std::string json_string(std::string_view bytes) {
  std::string s;
  append_utf8_lossy(s, bytes);
  return json(s).dump();
}

std::string ids_json(const std::vector<int32_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(ids[i]);
  }
  return s + "]";
}

// -m MODEL or --tokenizer FILE_OR_DIR (either names a GGUF file or a Hugging Face directory /
// tokenizer.json).
struct TokenizerFlags {
  std::string model, tokenizer;
  void add(ArgParser& ap) {
    ap.add_string({"-m", "--model"}, "MODEL", "GGUF file or Hugging Face model directory", &model);
    ap.add_string({"--tokenizer"}, "FILE_OR_DIR", "tokenizer.json or a directory holding it",
                  &tokenizer);
  }
  // Returns nullptr after printing the error; *code gets the exit code.
  std::unique_ptr<Tokenizer> load(const ArgParser& ap, int* code) const {
    if (model.empty() == tokenizer.empty()) {
      *code = ap.usage_error("give exactly one of -m MODEL or --tokenizer FILE_OR_DIR");
      return nullptr;
    }
    auto t = load_tokenizer(model.empty() ? tokenizer : model);
    if (!t.ok()) {
      std::fprintf(stderr, "ll3: %s\n", t.message().c_str());
      *code = 1;
      return nullptr;
    }
    return std::move(*t);
  }
};

// --jsonl: each input line {"text": ...} gives an output line {"ids": [...]}.
int tokenize_jsonl(const Tokenizer& tok, const std::string& path, bool add_bos,
                   bool parse_special) {
  std::string data;
  if (!read_input(path, &data)) {
    std::fprintf(stderr, "ll3 tokenize: cannot read %s\n", path.c_str());
    return 1;
  }
  std::istringstream in(data);
  std::string line, out;
  size_t lineno = 0;
  std::vector<int32_t> ids;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty() || line == "\r") continue;
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("text") || !j["text"].is_string()) {
      std::fprintf(stderr, "ll3 tokenize: %s:%zu: expected {\"text\": \"...\"}\n", path.c_str(),
                   lineno);
      return 1;
    }
    ids.clear();
    tok.encode_into(j["text"].get_ref<const std::string&>(), add_bos, parse_special, ids);
    out = "{\"ids\": " + ids_json(ids) + "}\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
  }
  return 0;
}

// --bench N: the text tokenized n times, each run's speed and the best.
void tokenize_bench(const Tokenizer& tok, const std::string& text, int n, bool add_bos,
                    bool parse_special) {
  // Run 1 starts with an empty word cache; later runs show the warm-cache speed.
  double best = 1e30;
  for (int i = 0; i < n; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    size_t n_tokens = tok.encode(text, add_bos, parse_special).size();
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, secs);
    std::printf("run %d%s: %zu bytes -> %zu tokens in %.3f s: %.2f MB/s, %.2f M tokens/s\n", i + 1,
                i == 0 ? " (cold cache)" : "", text.size(), n_tokens, secs,
                double(text.size()) / 1e6 / secs, double(n_tokens) / 1e6 / secs);
  }
  std::printf("best: %.2f MB/s\n", double(text.size()) / 1e6 / best);
}

int cmd_tokenize(int argc, char** argv) {
  ArgParser ap(
      "tokenize",
      "ll3 tokenize (-m MODEL | --tokenizer FILE_OR_DIR) (--text TEXT | --file F | --jsonl F) "
      "[--ids] [--parse-special] [--add-bos] [--bench N]",
      "Tokenize text. Prints one token per line (id and piece), or with --ids the ids as a "
      "JSON array. --jsonl: each input line {\"text\": ...} gives an output line {\"ids\": "
      "[...]}.");
  TokenizerFlags tf;
  tf.add(ap);
  std::string text, file, jsonl;
  bool text_given = false, ids_only = false, parse_special = false, add_bos = false;
  int bench = 0;
  ap.add({"--text"}, "TEXT", "the text to tokenize", [&](const std::string& v) {
    text = v;
    text_given = true;
    return std::string();
  });
  ap.add_string({"--file"}, "F", "read the text from a file ('-' for stdin)", &file);
  ap.add_string({"--jsonl"}, "F", "batch mode: JSON lines {\"text\": ...} ('-' for stdin)", &jsonl);
  ap.add_flag({"--ids"}, "print only the ids, as a JSON array", &ids_only);
  ap.add_flag({"--parse-special"}, "recognise special-token text such as <|eot_id|>",
              &parse_special);
  ap.add_flag({"--add-bos"}, "prepend the BOS token", &add_bos);
  ap.add_int({"--bench"}, "N", "tokenize the input N times and report MB/s (one thread)", &bench);
  int rc = ap.parse(argc, argv);
  if (rc >= 0) return rc;
  if (int(text_given) + int(!file.empty()) + int(!jsonl.empty()) != 1) {
    return ap.usage_error("give exactly one of --text, --file or --jsonl");
  }
  if (bench < 0) return ap.usage_error("--bench must be positive");
  auto tok = tf.load(ap, &rc);
  if (!tok) return rc;

  if (!jsonl.empty()) return tokenize_jsonl(*tok, jsonl, add_bos, parse_special);
  if (!file.empty() && !read_input(file, &text)) {
    std::fprintf(stderr, "ll3 tokenize: cannot read %s\n", file.c_str());
    return 1;
  }
  if (bench > 0) {
    tokenize_bench(*tok, text, bench, add_bos, parse_special);
    return 0;
  }
  auto ids = tok->encode(text, add_bos, parse_special);
  if (ids_only) {
    std::printf("%s\n", ids_json(ids).c_str());
  } else {
    for (int32_t id : ids) std::printf("%d\t%s\n", id, json_string(tok->piece(id)).c_str());
  }
  return 0;
}

// Ids from "1,2 3" or a JSON array.
bool parse_ids(const std::string& s, std::vector<int32_t>* out) {
  std::string t = s;
  for (char& c : t)
    if (c == ',' || c == '[' || c == ']' || c == '\n' || c == '\r' || c == '\t') c = ' ';
  std::istringstream in(t);
  std::string w;
  while (in >> w) {
    char* end = nullptr;
    long v = std::strtol(w.c_str(), &end, 10);
    if (*end != '\0' || v < 0 || v > 0x7FFFFFFF) return false;
    out->push_back(int32_t(v));
  }
  return true;
}

// Ids of a --jsonl line {"ids": [...]}, each in the vocabulary; false for anything else.
bool jsonl_ids(const std::string& line, int32_t n_vocab, std::vector<int32_t>* ids) {
  json j = json::parse(line, nullptr, false);
  bool ok = !j.is_discarded() && j.is_object() && j.contains("ids") && j["ids"].is_array();
  if (ok) {
    for (const auto& x : j["ids"]) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= n_vocab)
        ok = false;
      else
        ids->push_back(x.get<int32_t>());
    }
  }
  return ok;
}

// --jsonl: each line {"ids": [...]} gives {"text": ...}.
int detokenize_jsonl(const Tokenizer& tok, const std::string& path) {
  std::string data;
  if (!read_input(path, &data)) {
    std::fprintf(stderr, "ll3 detokenize: cannot read %s\n", path.c_str());
    return 1;
  }
  std::istringstream in(data);
  std::string line;
  size_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty() || line == "\r") continue;
    std::vector<int32_t> ids;
    if (!jsonl_ids(line, tok.n_vocab(), &ids)) {
      std::fprintf(stderr, "ll3 detokenize: %s:%zu: expected {\"ids\": [valid ids]}\n",
                   path.c_str(), lineno);
      return 1;
    }
    std::printf("{\"text\": %s}\n", json_string(tok.decode(ids)).c_str());
  }
  return 0;
}

// Whether every id is in the vocabulary (the first that is not is reported).
bool ids_in_vocab(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  for (int32_t id : ids)
    if (id >= tok.n_vocab()) {
      std::fprintf(stderr, "ll3 detokenize: id %d out of range (vocabulary has %d tokens)\n", id,
                   tok.n_vocab());
      return false;
    }
  return true;
}

// --stream: decoded id by id as a streaming client would, one chunk per line as a JSON string.
void print_stream_chunks(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  StreamDecoder sd(tok);
  for (int32_t id : ids) {
    std::string s = sd.push(id);
    if (!s.empty()) std::printf("%s\n", json(s).dump().c_str());
  }
  std::string s = sd.flush();
  if (!s.empty()) std::printf("%s\n", json(s).dump().c_str());
}

int cmd_detokenize(int argc, char** argv) {
  ArgParser ap(
      "detokenize",
      "ll3 detokenize (-m MODEL | --tokenizer FILE_OR_DIR) (--ids 1,2,3 | --file F | --jsonl F) "
      "[--stream]",
      "Decode token ids to text (raw bytes). --jsonl: each line {\"ids\": [...]} gives "
      "{\"text\": ...} (invalid UTF-8 as U+FFFD). --stream decodes id by id as a streaming "
      "client would (only whole UTF-8 characters), one chunk per line as JSON strings.");
  TokenizerFlags tf;
  tf.add(ap);
  std::string ids_arg, file, jsonl;
  bool stream = false;
  ap.add_string({"--ids"}, "IDS", "comma- or space-separated ids, or a JSON array", &ids_arg);
  ap.add_string({"--file"}, "F", "read the ids from a file ('-' for stdin)", &file);
  ap.add_string({"--jsonl"}, "F", "batch mode: JSON lines {\"ids\": [...]}", &jsonl);
  ap.add_flag({"--stream"}, "decode with the streaming detokenizer", &stream);
  int rc = ap.parse(argc, argv);
  if (rc >= 0) return rc;
  if (int(!ids_arg.empty()) + int(!file.empty()) + int(!jsonl.empty()) != 1) {
    return ap.usage_error("give exactly one of --ids, --file or --jsonl");
  }
  auto tok = tf.load(ap, &rc);
  if (!tok) return rc;
  if (!jsonl.empty()) return detokenize_jsonl(*tok, jsonl);
  std::string src = ids_arg;
  if (!file.empty() && !read_input(file, &src)) {
    std::fprintf(stderr, "ll3 detokenize: cannot read %s\n", file.c_str());
    return 1;
  }
  std::vector<int32_t> ids;
  if (!parse_ids(src, &ids)) return ap.usage_error("ids must be non-negative integers");
  if (!ids_in_vocab(*tok, ids)) return 1;
  if (stream) {
    print_stream_chunks(*tok, ids);
    return 0;
  }
  std::string text = tok->decode(ids);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

// The conversation file: a JSON array of messages, or an object {"messages": [...], "tools":
// [...], other template variables} (tools go to opt, the rest to *extra). Returns -1 to go on,
// else the exit code.
int read_conversation(const std::string& path, nlohmann::ordered_json* messages,
                      nlohmann::ordered_json* extra, ChatTemplateOptions* opt) {
  std::string data;
  if (!read_input(path, &data)) {
    std::fprintf(stderr, "ll3 template: cannot read %s\n", path.c_str());
    return 1;
  }
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(data, nullptr, false);
  if (j.is_array()) {
    *messages = j;
  } else if (j.is_object() && j.contains("messages") && j["messages"].is_array()) {
    *messages = j["messages"];
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.key() == "tools")
        opt->tools_json = it.value().dump();
      else if (it.key() != "messages")
        (*extra)[it.key()] = it.value();
    }
  } else {
    std::fprintf(stderr,
                 "ll3 template: %s: expected a JSON array of messages or {\"messages\": [...]}\n",
                 path.c_str());
    return 1;
  }
  return -1;
}

// --template and --tools: files that replace the model's template and the conversation's tools.
// Returns -1 to go on, else the exit code.
int read_template_files(const std::string& template_path, const std::string& tools_path,
                        std::string* tmpl, ChatTemplateOptions* opt) {
  if (!template_path.empty() && !read_input(template_path, tmpl)) {
    std::fprintf(stderr, "ll3 template: cannot read %s\n", template_path.c_str());
    return 1;
  }
  if (!tools_path.empty()) {
    if (!read_input(tools_path, &opt->tools_json)) {
      std::fprintf(stderr, "ll3 template: cannot read %s\n", tools_path.c_str());
      return 1;
    }
  }
  return -1;
}

int cmd_template(int argc, char** argv) {
  ArgParser ap(
      "template",
      "ll3 template (-m MODEL | --tokenizer FILE_OR_DIR) --messages FILE.json "
      "[--no-generation-prompt] "
      "[--template FILE] [--date STR] [--tools FILE.json] [--ids]",
      "Render the model's chat template. FILE.json is a JSON array of messages "
      "({\"role\", \"content\", optional \"tool_calls\"}) or an object {\"messages\": [...], "
      "\"tools\": [...], other template variables}. Prints the prompt (or with --ids its token "
      "ids).");
  TokenizerFlags tf;
  tf.add(ap);
  std::string messages_path, template_path, date, tools_path;
  bool no_gen = false, ids_only = false;
  ap.add_string({"--messages"}, "FILE.json", "the conversation ('-' for stdin)", &messages_path);
  ap.add_flag({"--no-generation-prompt"}, "do not end with the assistant header", &no_gen);
  ap.add_string({"--template"}, "FILE", "use this Jinja template instead of the model's",
                &template_path);
  ap.add_string({"--date"}, "STR", "date_string for Llama 3.1+ templates (\"26 Jul 2024\")", &date);
  ap.add_string({"--tools"}, "FILE.json", "a JSON array of tool definitions", &tools_path);
  ap.add_flag({"--ids"},
              "print the token ids of the rendered prompt (specials parsed, no extra BOS)",
              &ids_only);
  int rc = ap.parse(argc, argv);
  if (rc >= 0) return rc;
  if (messages_path.empty()) return ap.usage_error("--messages FILE.json is required");
  auto tok = tf.load(ap, &rc);
  if (!tok) return rc;
  nlohmann::ordered_json messages, extra = nlohmann::ordered_json::object();
  ChatTemplateOptions opt;
  if (int r = read_conversation(messages_path, &messages, &extra, &opt); r >= 0) return r;
  std::string tmpl = tok->vocab().chat_template;
  if (int r = read_template_files(template_path, tools_path, &tmpl, &opt); r >= 0) return r;
  opt.add_generation_prompt = !no_gen;
  opt.date_string = date;
  if (tok->bos_id() >= 0) opt.bos_token = tok->vocab().tokens[tok->bos_id()];
  if (tok->eos_id() >= 0) opt.eos_token = tok->vocab().tokens[tok->eos_id()];
  if (!extra.empty()) opt.extra_context_json = extra.dump();
  std::string warning;
  auto out = render_chat_json(tmpl, messages, opt, &warning);
  if (!out.ok()) {
    std::fprintf(stderr, "ll3 template: %s\n", out.message().c_str());
    return 1;
  }
  if (!warning.empty()) std::fprintf(stderr, "ll3 template: warning: %s\n", warning.c_str());
  if (ids_only) {
    std::printf("%s\n", ids_json(tok->encode(*out, false, true)).c_str());
  } else {
    std::fwrite(out->data(), 1, out->size(), stdout);
  }
  return 0;
}

LL3_COMMAND("tokenize", "text to token ids (also --jsonl batches and --bench)", cmd_tokenize);
LL3_COMMAND("detokenize", "token ids to text", cmd_detokenize);
LL3_COMMAND("template", "render a chat template for a conversation", cmd_template);

}  // namespace
}  // namespace ll3::cli
