#include "server/lora_routes.h"

#include <filesystem>

#include "server/json_fields.h"
#include "server/openai_output.h"

namespace ll3::server {

namespace {

ApiError error_of(int status, std::string type, std::string message, std::string code, std::string param = "") {
  ApiError e;
  e.status = status;
  e.type = std::move(type);
  e.message = std::move(message);
  e.code = std::move(code);
  e.param = std::move(param);
  return e;
}

void respond(ServeContext& ctx, HttpExchange& ex, int status, const ojson& body) {
  HttpResponse r;
  r.status = status;
  r.body = dump_json(body);
  r.headers = ctx.common_headers(ex.request());
  ex.respond(std::move(r));
}

// Whether `path` resolves to something inside directory `root` (symbolic links and .. followed).
bool under(const std::string& root, const std::string& path) {
  std::error_code ec1, ec2;
  const std::filesystem::path r = std::filesystem::canonical(root, ec1), p = std::filesystem::weakly_canonical(path, ec2);
  if (ec1 || ec2) return false;
  const std::string rs = r.string() + "/", ps = p.string();
  return ps.compare(0, rs.size(), rs) == 0;
}

// The body's string field `key`, required.
ApiError string_field(const ojson& b, const char* key, std::string* out) {
  const ojson* v = field(b, key);
  if (!v) return invalid_request(std::string("'") + key + "' is required", key);
  if (!v->is_string() || v->get<std::string>().empty()) return wrong_type(key, "a non-empty string", *v);
  *out = v->get<std::string>();
  return {};
}

}  // namespace

ApiError lora_error(const Status& st) {
  switch (st.code()) {
    case StatusCode::kNotFound:
      return error_of(404, "invalid_request_error", st.message(), "model_not_found", "model");
    case StatusCode::kConflict:
      return error_of(409, "invalid_request_error", st.message(), "lora_in_use");
    case StatusCode::kUnavailable:
      return error_of(503, "server_error", st.message(), "shutting_down");
    case StatusCode::kInvalid:
      return error_of(400, "invalid_request_error", st.message(), "invalid_lora", "lora_path");
    default:
      return error_of(500, "server_error", st.message(), "");
  }
}

ApiError resolve_loras(const ServeContext& ctx, const ApiRequest& r, std::vector<LoraUse>* out, std::string* model_id) {
  out->clear();
  if (r.model.empty() && r.lora.empty()) return {};
  const std::vector<LoraInfo> loaded = ctx.loras();
  auto put = [&](const std::string& name, float scale) {
    for (LoraUse& u : *out) {
      if (u.name == name) {
        u.scale = scale;
        return;
      }
    }
    out->push_back({name, scale});
  };
  for (const LoraInfo& l : loaded) {
    if (!r.model.empty() && l.name == r.model) {
      put(l.name, l.scale);
      *model_id = l.name;
    }
  }
  for (size_t k = 0; k < r.lora.size(); ++k) {
    const LoraRef& ref = r.lora[k];
    const std::string param = "lora[" + std::to_string(k) + "].id";
    if (ref.index >= 0) {
      if (ref.index >= static_cast<int64_t>(loaded.size())) {
        return error_of(404, "invalid_request_error",
                        "no LoRA adapter with id " + std::to_string(ref.index) + " (" + std::to_string(loaded.size()) + " loaded)",
                        "model_not_found", param);
      }
      put(loaded[static_cast<size_t>(ref.index)].name, ref.scale);
      continue;
    }
    bool found = false;
    for (const LoraInfo& l : loaded) found = found || l.name == ref.name;
    if (!found) return error_of(404, "invalid_request_error", "no LoRA adapter named '" + ref.name + "' is loaded", "model_not_found", param);
    put(ref.name, ref.scale);
  }
  return {};
}

void serve_load_lora(ServeContext& ctx, HttpExchange& ex) {
  const HttpRequest& req = ex.request();
  if (!ctx.runtime_lora()) {
    return ex.respond(ctx.error_response(
        error_of(403, "invalid_request_error", "loading LoRA adapters at run time is off (ll3 serve --allow-runtime-lora)", "runtime_lora_off"),
        req));
  }
  ojson b;
  LoraSpec spec;
  ApiError e = parse_body(req.body, &b);
  if (e.ok()) e = string_field(b, "lora_name", &spec.name);
  if (e.ok()) e = string_field(b, "lora_path", &spec.path);
  if (e.ok() && field(b, "scale")) {
    const ojson& s = b["scale"];
    if (!s.is_number() || !std::isfinite(s.get<double>())) e = wrong_type("scale", "a number", s);
    else spec.scale = s.get<float>();
  }
  if (!e.ok()) return ex.respond(ctx.error_response(e, req));
  if (!ctx.lora_root().empty() && !under(ctx.lora_root(), spec.path)) {
    return ex.respond(ctx.error_response(
        error_of(403, "invalid_request_error", "lora_path must lie under --lora-dir " + ctx.lora_root(), "lora_path_outside", "lora_path"),
        req));
  }
  Status st = ctx.load_lora(spec);
  if (!st.ok()) return ex.respond(ctx.error_response(lora_error(st), req));
  ex.log_field("lora", spec.name);
  respond(ctx, ex, 200, ojson{{"object", "lora_adapter"}, {"id", spec.name}, {"path", spec.path}, {"status", "loaded"}});
}

void serve_unload_lora(ServeContext& ctx, HttpExchange& ex) {
  const HttpRequest& req = ex.request();
  if (!ctx.runtime_lora()) {
    return ex.respond(ctx.error_response(
        error_of(403, "invalid_request_error", "unloading LoRA adapters at run time is off (ll3 serve --allow-runtime-lora)", "runtime_lora_off"),
        req));
  }
  ojson b;
  std::string name;
  ApiError e = parse_body(req.body, &b);
  if (e.ok()) e = string_field(b, "lora_name", &name);
  if (!e.ok()) return ex.respond(ctx.error_response(e, req));
  Status st = ctx.unload_lora(name);
  if (!st.ok()) return ex.respond(ctx.error_response(lora_error(st), req));
  ex.log_field("lora", name);
  respond(ctx, ex, 200, ojson{{"object", "lora_adapter"}, {"id", name}, {"status", "unloaded"}});
}

// llama-server's list: [{"id": index, "path", "scale"}], plus the name, rank and use counts.
void serve_lora_adapters(ServeContext& ctx, HttpExchange& ex) {
  ojson list = ojson::array();
  int64_t id = 0;
  for (const LoraInfo& l : ctx.loras()) {
    list.push_back(ojson{{"id", id++},      {"name", l.name},         {"path", l.path},        {"scale", l.scale},
                         {"format", l.format}, {"rank", l.rank},      {"bytes", l.bytes},      {"requests", l.requests},
                         {"running", l.running}});
  }
  respond(ctx, ex, 200, list);
}

}  // namespace ll3::server
