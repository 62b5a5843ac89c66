// ll3 embed: one text's embedding (the pooled final hidden state, L2-normalized, as the
// server's /v1/embeddings answers it), printed as a JSON array.
#include <cstdio>
#include <future>

#include "cli_common.h"
#include "commands.h"
#include "server/embeddings.h"

namespace ll3::cli {

namespace {

int cmd_embed(int argc, char** argv) {
  std::string model_path, prompt, prompt_file, pooling = "mean";
  bool raw = false;
  EngineFlags ef;
  ArgParser ap("embed", "ll3 embed [-m MODEL] -p TEXT [--pooling mean|last] [engine flags]",
               "Print a text's embedding as a JSON array: the model's final hidden state after the output norm, "
               "pooled over the text's tokens (<|begin_of_text|> added) and L2-normalized.");
  ap.add_string({"-m", "--model"}, "MODEL", "GGUF file or Hugging Face directory", &model_path);
  ap.add_string({"-p", "--prompt"}, "TEXT", "the text", &prompt);
  ap.add_string({"-f", "--file"}, "FILE", "read the text from FILE", &prompt_file);
  ap.add_string({"--pooling"}, "MODE", "mean (over all tokens) or last (the last token's row); default mean", &pooling);
  ap.add_flag({"--no-normalize"}, "print the pooled vector as it is, not L2-normalized", &raw);
  add_engine_flags(ap, &ef, false);
  if (int rc = ap.parse(argc, argv); rc >= 0) return rc;
  if (!prompt_file.empty()) {
    if (!prompt.empty()) return ap.usage_error("give -p or -f, not both");
    Result<std::string> text = read_text_file(prompt_file);
    if (!text.ok()) return ap.usage_error(text.message());
    prompt = std::move(text.value());
  }
  if (prompt.empty()) return ap.usage_error("a text is required (-p TEXT or -f FILE)");
  Request req;
  if (!server::parse_pooling(pooling, &req.pooling)) return ap.usage_error("--pooling must be mean or last");
  EngineOptions eo;
  if (std::string err = finish_engine_flags(ef, &eo); !err.empty()) return ap.usage_error(err);

  Result<LoadedModel> lm = load_model_cli(model_path, true, ef.load);
  if (!lm.ok()) return fail("embed", lm.message());
  req.tokens = lm->tokenizer->encode(prompt, true, true);
  if (eo.ctx == 0 && eo.kv_memory == 0) {
    eo.ctx = std::min<int64_t>(lm->model->config.context_length, std::max<int64_t>(static_cast<int64_t>(req.tokens.size()), 512));
  }
  eo.max_seqs = 1;
  eo.batch_wait_ms = 0;
  Result<std::unique_ptr<Engine>> engine = make_engine(std::move(lm.value()), eo);
  if (!engine.ok()) return fail("embed", engine.message());
  std::vector<float> vec;
  std::promise<FinishInfo> done;
  req.on_embedding = [&](const std::vector<float>& v) { vec = v; };
  req.on_finish = [&](const FinishInfo& f) { done.set_value(f); };
  std::future<FinishInfo> fin = done.get_future();
  Result<RequestId> id = (*engine)->submit(std::move(req));
  if (!id.ok()) return fail("embed", id.message());
  const FinishInfo f = fin.get();
  if (f.reason != FinishReason::kStop) return fail("embed", f.error.empty() ? finish_reason_name(f.reason) : f.error);
  if (!raw) server::l2_normalize(&vec);
  std::string out = "[";
  for (size_t i = 0; i < vec.size(); ++i) out += strprintf(i == 0 ? "%.9g" : ",%.9g", static_cast<double>(vec[i]));
  out += "]\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace

LL3_COMMAND("embed", "print a text's embedding (pooled final hidden state) as JSON", cmd_embed);

}  // namespace ll3::cli
