#include "server/structured_output.h"

#include <list>
#include <mutex>
#include <unordered_map>

namespace ll3::server {

using ojson = nlohmann::ordered_json;

namespace {

ApiError format_error(const std::string& message) { return invalid_request(message, "response_format"); }

const ojson* member(const ojson& o, const char* key) {
  if (!o.is_object()) return nullptr;
  auto it = o.find(key);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

// A compiled schema, or the 400 that names what it cannot enforce.
ApiError schema_grammar(const ojson& schema, const std::string& where, std::shared_ptr<const Grammar>* out) {
  if (!schema.is_object() && !schema.is_boolean()) return format_error("'" + where + "' must be a JSON Schema object");
  Result<std::shared_ptr<const Grammar>> g = cached_schema_grammar(schema.dump());
  if (!g.ok()) return format_error("'" + where + "': " + g.message());
  *out = *g;
  return {};
}

// Rewrites the "$ref"s of a schema moved to `base` (a JSON pointer) inside a bigger one, so that
// "#/$defs/x" still names its own definition. Values that are data, not schemas (const, enum,
// default, examples), keep any "$ref" key they hold.
void rebase_refs(ojson& s, const std::string& base) {
  if (s.is_object()) {
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (it.key() == "const" || it.key() == "enum" || it.key() == "default" || it.key() == "examples") continue;
      if (it.key() == "$ref" && it->is_string()) {
        const std::string ref = it->get<std::string>();
        if (ref == "#") *it = "#" + base;
        else if (ref.rfind("#/", 0) == 0) *it = "#" + base + ref.substr(1);
      } else {
        rebase_refs(*it, base);
      }
    }
  } else if (s.is_array()) {
    for (ojson& v : s) rebase_refs(v, base);
  }
}

}  // namespace

Result<std::shared_ptr<const Grammar>> cached_schema_grammar(const std::string& schema) {
  // Least recently used first; failures are not kept (they are cheap to find again).
  static std::mutex mu;
  static std::list<std::pair<std::string, std::shared_ptr<const Grammar>>> lru;
  static std::unordered_map<std::string, decltype(lru)::iterator> index;
  constexpr size_t kCapacity = 64;
  {
    std::lock_guard<std::mutex> lk(mu);
    if (auto it = index.find(schema); it != index.end()) {
      lru.splice(lru.end(), lru, it->second);
      return it->second->second;
    }
  }
  Result<std::shared_ptr<const Grammar>> g = Grammar::from_json_schema(schema);
  if (!g.ok()) return g;
  std::lock_guard<std::mutex> lk(mu);
  if (index.count(schema) == 0) {
    lru.emplace_back(schema, *g);
    index[schema] = std::prev(lru.end());
    if (lru.size() > kCapacity) {
      index.erase(lru.front().first);
      lru.pop_front();
    }
  }
  return g;
}

ApiError parse_output_grammar(const ojson& b, std::shared_ptr<const Grammar>* out) {
  out->reset();
  int sources = 0;
  if (const ojson* rf = member(b, "response_format")) {
    if (!rf->is_object()) return format_error("'response_format' must be an object");
    const ojson* t = member(*rf, "type");
    if (!t || !t->is_string()) return format_error("'response_format.type' must be \"text\", \"json_object\" or \"json_schema\"");
    const std::string type = t->get<std::string>();
    if (type == "json_schema") {
      const ojson* js = member(*rf, "json_schema");
      if (!js || !js->is_object()) return format_error("'response_format.json_schema' must be an object with a 'schema'");
      const ojson* schema = member(*js, "schema");
      if (!schema) return format_error("'response_format.json_schema.schema' is required");
      RETURN_IF_API_ERROR(schema_grammar(*schema, "response_format.json_schema.schema", out));
      ++sources;
    } else if (type == "json_object") {
      // llama-server also takes a schema here.
      if (const ojson* schema = member(*rf, "schema")) {
        RETURN_IF_API_ERROR(schema_grammar(*schema, "response_format.schema", out));
      } else {
        *out = Grammar::json_object();
      }
      ++sources;
    } else if (type != "text") {
      return format_error("'response_format.type' must be \"text\", \"json_object\" or \"json_schema\", got '" + type + "'");
    }
  }
  if (const ojson* schema = member(b, "json_schema")) {  // llama-server's field
    RETURN_IF_API_ERROR(schema_grammar(*schema, "json_schema", out));
    ++sources;
  }
  if (const ojson* gbnf = member(b, "grammar")) {  // llama-server's field: GBNF text
    if (!gbnf->is_string()) return invalid_request("'grammar' must be a string of GBNF rules", "grammar");
    Result<std::shared_ptr<const Grammar>> g = Grammar::from_gbnf(gbnf->get<std::string>());
    if (!g.ok()) return invalid_request("'grammar': " + g.message(), "grammar");
    *out = *g;
    ++sources;
  }
  if (sources > 1) return format_error("give one of 'response_format' (json), 'json_schema' and 'grammar', not several");
  return {};
}

ApiError tool_call_grammar(const ojson& tools, std::shared_ptr<const Grammar>* out) {
  // {"anyOf": [call of tool 0, call of tool 1, ...], "$defs": {"p0": parameters 0, ...}}: each
  // tool's parameters moved under $defs with their own $refs rebased, so they keep resolving.
  ojson any = ojson::array(), defs = ojson::object();
  for (size_t i = 0; i < tools.size(); ++i) {
    const ojson& fn = tools[i]["function"];
    const std::string def = "p" + std::to_string(i);
    ojson params = fn.contains("parameters") && fn["parameters"].is_object() ? fn["parameters"] : ojson{{"type", "object"}};
    // Each tool's schema on its own first, so a refusal names the tool and a pointer the client wrote.
    if (Result<std::shared_ptr<const Grammar>> own = cached_schema_grammar(params.dump()); !own.ok()) {
      const std::string p = "tools[" + std::to_string(i) + "].function.parameters";
      return invalid_request("'" + p + "': " + own.message(), p);
    }
    rebase_refs(params, "/$defs/" + def);
    defs[def] = std::move(params);
    ojson call = {{"type", "object"},
                  {"properties", {{"name", {{"const", fn["name"]}}}, {"parameters", {{"$ref", "#/$defs/" + def}}}}},
                  {"required", {"name", "parameters"}},
                  {"additionalProperties", false}};
    any.push_back(std::move(call));
  }
  ojson schema = any.size() == 1 ? any[0] : ojson{{"anyOf", std::move(any)}};
  schema["$defs"] = std::move(defs);
  Result<std::shared_ptr<const Grammar>> g = cached_schema_grammar(schema.dump());
  if (!g.ok()) return invalid_request("a tool's 'parameters' cannot be enforced: " + g.message(), "tools");
  *out = *g;
  return {};
}

std::string generic_tool_preamble(const ojson& tools, bool required) {
  ojson list = ojson::array();
  for (const ojson& t : tools) {
    const ojson& fn = t["function"];
    ojson d = ojson::object();
    d["name"] = fn["name"];
    if (fn.contains("description")) d["description"] = fn["description"];
    d["parameters"] = fn.contains("parameters") ? fn["parameters"] : ojson{{"type", "object"}};
    list.push_back(std::move(d));
  }
  std::string s =
      "You have access to the following functions. Each is given as JSON: its name, what it does, and a JSON Schema of "
      "its parameters.\n\n" +
      list.dump(2) +
      "\n\nTo call a function, answer with only a JSON object of the form {\"name\": function name, \"parameters\": "
      "arguments as a JSON object}, and nothing else. The result comes back in a message from the tool.";
  s += required ? " You must call one of the functions now." : " If no function is needed, answer the user directly.";
  return s;
}

}  // namespace ll3::server
