// ll3::Grammar: the public face of the compiled grammar (ll3/grammar.h).
#include "ll3/grammar.h"

#include "grammar/gbnf_parser.h"
#include "grammar/grammar_impl.h"
#include "grammar/json_schema.h"

namespace ll3 {

Grammar::Grammar(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Grammar::~Grammar() = default;

std::string Grammar::to_gbnf() const { return impl_->gbnf; }

Result<std::shared_ptr<const Grammar>> Grammar::from_gbnf(const std::string& text, const std::string& root) {
  auto impl = grammar::parse_gbnf(text, root);
  if (!impl.ok()) return impl.status();
  return std::shared_ptr<const Grammar>(new Grammar(std::move(*impl)));
}

std::shared_ptr<const Grammar> Grammar::json_object() {
  // Compiled once: the same grammar serves every json_object request.
  static const std::shared_ptr<const Grammar> g = [] {
    auto r = from_gbnf(grammar::json_object_gbnf(), "root");
    if (!r.ok()) {
      std::fprintf(stderr, "ll3: internal error: json_object grammar: %s\n", r.message().c_str());
      std::abort();
    }
    return *r;
  }();
  return g;
}

Result<std::shared_ptr<const Grammar>> Grammar::from_json_schema(const std::string& schema) {
  auto text = grammar::json_schema_to_gbnf(schema);
  if (!text.ok()) return text.status();
  auto g = from_gbnf(*text, "root");
  if (!g.ok()) return g.status().with_context("json schema: internal grammar error: ");
  return g;
}

}  // namespace ll3
