#include "server/embeddings.h"

#include "server/json_fields.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace ll3::server {

namespace {

const char* kInputShapes = "a string, an array of strings, an array of token ids or an array of arrays of token ids";


// A string field ("" when absent).
ApiError get_string(const ojson& b, const char* key, std::string* out) {
  const ojson* v = field(b, key);
  if (!v) return {};
  if (!v->is_string()) return wrong_type(key, "a string", *v);
  *out = v->get<std::string>();
  return {};
}

// `input` in any of its four shapes into one Prompt per input.
ApiError read_inputs(const ojson& in, const ModelInfo& model, std::vector<Prompt>* out) {
  if (in.is_string()) {
    if (in.get_ref<const std::string&>().empty()) return invalid_request("'input' must not be empty", "input");
    Prompt p;
    p.text = in.get<std::string>();
    out->push_back(std::move(p));
    return {};
  }
  if (!in.is_array()) return wrong_type("input", kInputShapes, in);
  if (in.empty()) return invalid_request("'input' must not be empty", "input");
  const ojson& first = in[0];
  if (first.is_number()) {
    Prompt p;
    p.is_tokens = true;
    ApiError e = read_token_ids(in, "input", model, &p.tokens);
    if (e.ok()) out->push_back(std::move(p));
    return e;
  }
  if (in.size() > kMaxPrompts) return invalid_request("'input' holds more than " + std::to_string(kMaxPrompts) + " inputs", "input");
  for (size_t i = 0; i < in.size(); ++i) {
    const std::string param = "input[" + std::to_string(i) + "]";
    const ojson& x = in[i];
    Prompt p;
    if (x.is_string() && first.is_string()) {
      if (x.get_ref<const std::string&>().empty()) return invalid_request("'" + param + "' must not be empty", param);
      p.text = x.get<std::string>();
    } else if (x.is_array() && first.is_array()) {
      p.is_tokens = true;
      if (x.empty()) return invalid_request("'" + param + "' must not be empty", param);
      if (ApiError e = read_token_ids(x, param, model, &p.tokens); !e.ok()) return e;
    } else {
      return wrong_type(param, first.is_string() ? "a string (like input[0])" : first.is_array() ? "an array of token ids (like input[0])" : kInputShapes, x);
    }
    out->push_back(std::move(p));
  }
  return {};
}

// One /v1/embeddings request in flight: its inputs' engine requests and their vectors, carried
// to the connection's strand (engine callbacks only post).
class EmbeddingsCall : public std::enable_shared_from_this<EmbeddingsCall> {
 public:
  EmbeddingsCall(ServeContext& ctx, std::shared_ptr<HttpExchange> ex, EmbeddingRequest req)
      : ctx_(ctx), ex_(std::move(ex)), req_(std::move(req)) {}
  ~EmbeddingsCall() {
    if (started_ && !completed_) ctx_.call_finished();
  }
  void start();

 private:
  struct Item {
    std::vector<int32_t> tokens;
    RequestId id = 0;
    bool live = false;
    std::vector<float> vec;
  };
  void on_finish(size_t i, const FinishInfo& f);
  void fail(ApiError e);  // the response becomes this error; live inputs are cancelled
  void client_gone();
  void complete();

  ServeContext& ctx_;
  std::shared_ptr<HttpExchange> ex_;
  EmbeddingRequest req_;
  std::vector<Item> items_;
  int live_ = 0;
  bool started_ = false, gone_ = false, completed_ = false;
  ApiError error_;
};

void EmbeddingsCall::start() {
  items_.resize(req_.inputs.size());
  for (size_t i = 0; i < items_.size(); ++i) {
    const Prompt& p = req_.inputs[i];
    items_[i].tokens = p.is_tokens ? p.tokens : ctx_.encode(p.text, true);
  }
  ctx_.call_started();
  started_ = true;
  auto self = shared_from_this();
  ex_->on_close([self] { self->client_gone(); });
  for (size_t i = 0; i < items_.size(); ++i) {
    Request r;
    r.tokens = items_[i].tokens;
    r.pooling = req_.pooling;
    // On the engine's thread: hand over and return at once. on_embedding comes just before
    // on_finish, so the vector reaches the strand first.
    r.on_embedding = [self, i](const std::vector<float>& v) {
      self->ctx_.from_engine(self->ex_, [self, i, v] { self->items_[i].vec = v; });
    };
    r.on_finish = [self, i](const FinishInfo& f) { self->ctx_.from_engine(self->ex_, [self, i, f] { self->on_finish(i, f); }); };
    Result<RequestId> id = ctx_.submit(std::move(r));
    if (!id.ok()) {
      ApiError e = submit_error(id.status(), Endpoint::kCompletions, ctx_.shutting_down());
      if (e.param == "input" && items_.size() > 1) e.param = "input[" + std::to_string(i) + "]";
      if (!e.param.empty()) e.message = "'" + e.param + "': " + e.message;
      fail(std::move(e));
      break;
    }
    items_[i].id = id.value();
    items_[i].live = true;
    ++live_;
  }
  if (live_ == 0) complete();  // else complete() answers once the submitted inputs have ended
}

void EmbeddingsCall::on_finish(size_t i, const FinishInfo& f) {
  items_[i].live = false;
  --live_;
  if (!gone_ && error_.ok()) {
    ApiError e;
    if (f.reason == FinishReason::kError) {
      e.status = 500;
      e.type = "server_error";
      e.message = "embedding failed: " + f.error;
    } else if (f.reason == FinishReason::kCancelled) {
      // Neither the client nor an error of ours asked for it: the engine is stopping.
      e.status = 503;
      e.type = "server_error";
      e.code = "shutting_down";
      e.message = "the server is shutting down; the request was cancelled";
    } else if (items_[i].vec.empty()) {
      e.status = 500;
      e.type = "server_error";
      e.message = "the engine finished an embedding request without its vector";
    }
    if (!e.ok()) fail(std::move(e));
  }
  if (live_ == 0) complete();
}

void EmbeddingsCall::fail(ApiError e) {
  if (!error_.ok()) return;
  error_ = std::move(e);
  for (Item& it : items_) {
    if (it.live) ctx_.cancel(it.id);
  }
}

void EmbeddingsCall::client_gone() {
  if (gone_ || completed_) return;
  gone_ = true;
  for (Item& it : items_) {
    if (it.live) ctx_.cancel(it.id);
  }
}

void EmbeddingsCall::complete() {
  if (completed_) return;
  completed_ = true;
  int64_t prompt_tokens = 0;
  for (const Item& it : items_) prompt_tokens += static_cast<int64_t>(it.tokens.size());
  ex_->log_field("inputs", static_cast<int64_t>(items_.size()));
  ex_->log_field("prompt_tokens", prompt_tokens);
  if (!error_.ok()) ex_->log_field("error", error_.message);
  if (started_) ctx_.call_finished();
  if (gone_) return;
  if (!error_.ok()) return ex_->respond(ctx_.error_response(error_, ex_->request()));
  std::vector<std::vector<float>> vectors;
  vectors.reserve(items_.size());
  for (Item& it : items_) {
    l2_normalize(&it.vec);
    vectors.push_back(std::move(it.vec));
  }
  HttpResponse r;
  r.body = dump_json(embeddings_json(ctx_.model().id, vectors, req_.base64, prompt_tokens));
  r.headers = ctx_.common_headers(ex_->request());
  ex_->respond(std::move(r));
}

}  // namespace

bool parse_pooling(std::string_view name, Pooling* out) {
  if (name == "mean") {
    *out = Pooling::kMean;
  } else if (name == "last") {
    *out = Pooling::kLast;
  } else {
    return false;
  }
  return true;
}

ApiError parse_embedding_request(std::string_view body, const ModelInfo& model, int64_t n_embd, Pooling default_pooling,
                                 EmbeddingRequest* out) {
  ojson b;
  if (ApiError e = parse_body(body, &b); !e.ok()) return e;
  *out = EmbeddingRequest();
  out->pooling = default_pooling;
  std::string s;
  if (ApiError e = get_string(b, "model", &s); !e.ok()) return e;
  s.clear();
  if (ApiError e = get_string(b, "encoding_format", &s); !e.ok()) return e;
  if (!s.empty() && s != "float" && s != "base64") {
    return invalid_request("'encoding_format' must be \"float\" or \"base64\", got \"" + s + "\"", "encoding_format");
  }
  out->base64 = s == "base64";
  if (const ojson* d = field(b, "dimensions")) {
    if (!d->is_number_integer() || d->get<int64_t>() != n_embd) {
      return invalid_request("'dimensions' must be the model's embedding size, " + std::to_string(n_embd) +
                                 " (vectors are not shortened), got " + d->dump(),
                             "dimensions");
    }
  }
  s.clear();
  if (ApiError e = get_string(b, "pooling", &s); !e.ok()) return e;
  if (!s.empty() && !parse_pooling(s, &out->pooling)) {
    return invalid_request("'pooling' must be \"mean\" or \"last\", got \"" + s + "\"", "pooling");
  }
  const ojson* in = field(b, "input");
  if (!in) return invalid_request("'input' is required", "input");
  return read_inputs(*in, model, &out->inputs);
}

void l2_normalize(std::vector<float>* v) {
  double sum = 0;
  for (float x : *v) sum += static_cast<double>(x) * x;
  const double scale = sum > 0 ? 1.0 / std::sqrt(sum) : 0.0;
  for (float& x : *v) x = static_cast<float>(x * scale);
}

std::string base64_floats(const std::vector<float>& v) {
  static const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  static_assert(std::endian::native == std::endian::little, "float bytes are sent little-endian");
  std::string bytes(v.size() * sizeof(float), '\0');
  if (!v.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t w = 0;
    for (size_t j = 0; j < 3; ++j) w = (w << 8) | (j < n ? static_cast<uint8_t>(bytes[i + j]) : 0u);
    for (size_t j = 0; j < 4; ++j) out += j <= n ? kAlphabet[(w >> (18 - 6 * j)) & 63] : '=';
  }
  return out;
}

ojson embeddings_json(const std::string& model_id, const std::vector<std::vector<float>>& vectors, bool base64,
                      int64_t prompt_tokens) {
  ojson data = ojson::array();
  for (size_t i = 0; i < vectors.size(); ++i) {
    ojson d = ojson::object();
    d["object"] = "embedding";
    d["index"] = i;
    if (base64) {
      d["embedding"] = base64_floats(vectors[i]);
    } else {
      d["embedding"] = vectors[i];
    }
    data.push_back(std::move(d));
  }
  ojson r = ojson::object();
  r["object"] = "list";
  r["data"] = std::move(data);
  r["model"] = model_id;
  r["usage"] = {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}};
  return r;
}

void serve_embeddings(ServeContext& ctx, const std::shared_ptr<HttpExchange>& ex, int64_t n_embd, Pooling default_pooling) {
  EmbeddingRequest req;
  ApiError e = parse_embedding_request(ex->request().body, ctx.model(), n_embd, default_pooling, &req);
  if (!e.ok()) {
    ex->log_field("error", e.message);
    return ex->respond(ctx.error_response(e, ex->request()));
  }
  ctx.metrics().count_embeddings(static_cast<int64_t>(req.inputs.size()));
  std::make_shared<EmbeddingsCall>(ctx, ex, std::move(req))->start();
}

}  // namespace ll3::server
