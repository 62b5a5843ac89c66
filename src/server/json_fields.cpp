#include "server/json_fields.h"

#include <cmath>
#include <limits>

namespace ll3::server {

const char* json_type_name(const ojson& v) {
  switch (v.type()) {
    case ojson::value_t::null: return "null";
    case ojson::value_t::boolean: return "a boolean";
    case ojson::value_t::string: return "a string";
    case ojson::value_t::array: return "an array";
    case ojson::value_t::object: return "an object";
    case ojson::value_t::binary: return "binary";
    case ojson::value_t::discarded: return "invalid";
    default: return "a number";
  }
}

ApiError wrong_type(const std::string& param, const char* want, const ojson& got) {
  return invalid_request("'" + param + "' must be " + want + ", got " + json_type_name(got), param);
}


namespace {

// nlohmann's DOM builder that keeps the parse error's message instead of throwing it: malformed
// bodies are the common case of hostile input, and a throw per request is the costliest part of
// refusing one (a fuzzer's run spends most of its time there otherwise). The message is the one
// the exception would carry.
struct MessageKeepingSax : nlohmann::detail::json_sax_dom_parser<ojson> {
  using Base = nlohmann::detail::json_sax_dom_parser<ojson>;
  std::string error;
  explicit MessageKeepingSax(ojson& root) : Base(root, /*allow_exceptions=*/false) {}
  template <class Exception>
  bool parse_error(std::size_t position, const std::string& last_token, const Exception& ex) {
    error = ex.what();
    return Base::parse_error(position, last_token, ex);
  }
};

}  // namespace

ApiError parse_body(std::string_view body, ojson* out) {
  if (json_depth(body, kMaxJsonDepth) > kMaxJsonDepth) {
    return invalid_request("the request body nests JSON deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  }
  ojson parsed;
  MessageKeepingSax sax(parsed);
  if (!ojson::sax_parse(body.begin(), body.end(), &sax) || parsed.is_discarded()) {
    return invalid_request("the request body is not valid JSON: " + sax.error);
  }
  *out = std::move(parsed);
  if (!out->is_object()) return invalid_request(std::string("the request body must be a JSON object, got ") + json_type_name(*out));
  return {};
}


const ojson* field(const ojson& o, const char* key) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return nullptr;
  return &*it;
}


ApiError read_int(const ojson& v, const std::string& param, int64_t lo, int64_t hi, int64_t* out) {
  int64_t x = 0;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return invalid_request("'" + param + "' is out of range", param);
    }
    x = static_cast<int64_t>(u);
  } else if (v.is_number_integer()) {
    x = v.get<int64_t>();
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d) || d != std::floor(d)) return wrong_type(param, "an integer", v);
    if (d < -9.2e18 || d > 9.2e18) return invalid_request("'" + param + "' is out of range", param);
    x = static_cast<int64_t>(d);
  } else {
    return wrong_type(param, "an integer", v);
  }
  if (x < lo || x > hi) {
    return invalid_request("'" + param + "' must be in " + std::to_string(lo) + ".." + std::to_string(hi) + ", got " +
                               std::to_string(x),
                           param);
  }
  *out = x;
  return {};
}


ApiError read_token_ids(const ojson& arr, const std::string& param, const ModelInfo& model, std::vector<int32_t>* out) {
  out->clear();
  out->reserve(arr.size());
  const int64_t hi = model.n_vocab > 0 ? model.n_vocab - 1 : std::numeric_limits<int32_t>::max();
  for (size_t i = 0; i < arr.size(); ++i) {
    int64_t id = 0;
    RETURN_IF_API_ERROR(read_int(arr[i], param + "[" + std::to_string(i) + "]", 0, hi, &id));
    out->push_back(static_cast<int32_t>(id));
  }
  return {};
}


}  // namespace ll3::server
