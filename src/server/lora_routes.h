// LoRA adapters through the API (model/lora.h, Engine::load_lora): which adapters a request
// runs with ("model" naming an adapter, as vLLM serves them, or llama-server's per-request
// "lora": [{id, scale}]), the run-time load and unload routes (vLLM's POST /v1/load_lora_adapter
// and /v1/unload_lora_adapter, behind --allow-runtime-lora) and llama-server's GET /lora-adapters.
#pragma once

#include <string>
#include <vector>

#include "server/generate_call.h"
#include "server/http_server.h"
#include "server/openai_request.h"

namespace ll3::server {

// The adapters of `r`: the one "model" names (at its loaded scale), then each of "lora" (an index
// counts in GET /lora-adapters' order, by name), the later entry winning where both name one.
// *model_id becomes the adapter's name when "model" names one. A 404 names an adapter that is
// not loaded.
ApiError resolve_loras(const ServeContext& ctx, const ApiRequest& r, std::vector<LoraUse>* out, std::string* model_id);

// An engine status about adapters as the API reports it: 404 unknown, 409 in use, 400 bad file.
ApiError lora_error(const Status& st);

void serve_load_lora(ServeContext& ctx, HttpExchange& ex);
void serve_unload_lora(ServeContext& ctx, HttpExchange& ex);
void serve_lora_adapters(ServeContext& ctx, HttpExchange& ex);

}  // namespace ll3::server
