// POST /v1/embeddings, OpenAI's shape: `input` (a string, an array of strings, an array of token
// ids or an array of arrays of token ids), `model`, `encoding_format` ("float" | "base64":
// little-endian float32 bytes, what the official clients ask for by default), `dimensions`
// (only the model's own width), and ll3's `pooling` ("mean" | "last"; the server's --pooling
// when absent). Each vector is the model's final hidden state after the output norm, pooled
// over the input's tokens (BOS added to text, as for generation) and L2-normalized.
//
// One engine request per input, all submitted at once so that the engine batches them; they
// are cancelled when the client goes away.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ll3/request.h"
#include "server/generate_call.h"
#include "server/openai_output.h"
#include "server/openai_request.h"

namespace ll3::server {

struct EmbeddingRequest {
  std::vector<Prompt> inputs;  // text (tokenized with BOS) or token ids (as given)
  Pooling pooling = Pooling::kMean;
  bool base64 = false;
};

// The body, checked field by field (pure: testable and fuzzable on its own). n_embd: the only
// `dimensions` accepted.
ApiError parse_embedding_request(std::string_view body, const ModelInfo& model, int64_t n_embd, Pooling default_pooling,
                                 EmbeddingRequest* out);

// v / ||v||_2 (zeros stay zeros), as llama.cpp's --embd-normalize 2.
void l2_normalize(std::vector<float>* v);
// The floats' little-endian bytes, base64 (RFC 4648, padded).
std::string base64_floats(const std::vector<float>& v);

// The response: {object: "list", data: [{object: "embedding", index, embedding}], model, usage}.
ojson embeddings_json(const std::string& model_id, const std::vector<std::vector<float>>& vectors, bool base64,
                      int64_t prompt_tokens);

// "mean" / "last" as Pooling (false for anything else).
bool parse_pooling(std::string_view name, Pooling* out);

// Serves one request on the connection's strand: parse, tokenize, submit, answer.
void serve_embeddings(ServeContext& ctx, const std::shared_ptr<HttpExchange>& ex, int64_t n_embd, Pooling default_pooling);

}  // namespace ll3::server
