// Constrained output: a grammar that every generated text must match, enforced while sampling
// (a token whose bytes the grammar cannot continue with is never drawn). Compiled once, shared
// by any number of requests (Request::grammar); each request keeps its own position in it.
//
// Sources: a JSON Schema (OpenAI's response_format json_schema, tool-call arguments), any JSON
// object (response_format json_object), or llama.cpp's GBNF text. A schema keyword that cannot
// be enforced is an error naming it and where it is, never silently ignored.
#pragma once

#include <memory>
#include <string>

#include "ll3/status.h"

namespace ll3 {

class Grammar {
 public:
  struct Impl;

  // JSON text of a value valid under `schema` (JSON text of a JSON Schema, draft 2020-12 /
  // OpenAI structured outputs subset and more). Errors name the keyword and its JSON pointer.
  static Result<std::shared_ptr<const Grammar>> from_json_schema(const std::string& schema);
  // JSON text of any object.
  static std::shared_ptr<const Grammar> json_object();
  // llama.cpp's GBNF: rules `name ::= alternatives`, literals, [character classes], groups,
  // ?, *, +, {m,n}; `root` names the start rule.
  static Result<std::shared_ptr<const Grammar>> from_gbnf(const std::string& text, const std::string& root = "root");

  ~Grammar();
  Grammar(const Grammar&) = delete;
  Grammar& operator=(const Grammar&) = delete;

  const Impl& impl() const { return *impl_; }
  // The grammar as GBNF text (what a schema compiled to; for errors and debugging).
  std::string to_gbnf() const;

 private:
  explicit Grammar(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ll3
