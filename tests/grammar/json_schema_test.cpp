// JSON Schema -> grammar: the corpus (schema_corpus.cpp) accepted and refused where expected,
// refusals that name the keyword and its JSON pointer, and the json_object grammar.
#include <gtest/gtest.h>

#include "grammar/json_schema.h"
#include "grammar_test_util.h"
#include "schema_corpus.h"

namespace ll3::grammar {
namespace {

using test::accepted_prefix;
using test::matches;

TEST(JsonSchema, CorpusAcceptsValidAndRefusesInvalidWhereExpected) {
  ASSERT_GE(test::schema_corpus().size(), 30u);
  for (const auto& c : test::schema_corpus()) {
    SCOPED_TRACE(c.name);
    auto g = Grammar::from_json_schema(c.schema);
    ASSERT_TRUE(g.ok()) << g.message();
    for (const auto& text : c.valid) EXPECT_TRUE(matches(*g, text)) << "valid: " << text << "\n" << (*g)->to_gbnf();
    for (const auto& r : c.invalid) {
      size_t at = accepted_prefix(*g, r.text);
      EXPECT_EQ(at, r.at) << "invalid: " << r.text;
      if (at == r.text.size()) {
        EXPECT_FALSE(matches(*g, r.text)) << "invalid but complete: " << r.text;
      }
    }
  }
}

TEST(JsonSchema, RefusalsNameKeywordAndPointer) {
  struct Case {
    const char* schema;
    const char* expect;
  } cases[] = {
      {R"({"type":"object","properties":{"tags":{"type":"array","uniqueItems":true}}})", "'uniqueItems' at #/properties/tags is not supported"},
      {R"({"type":"number","multipleOf":3})", "'multipleOf' at # is not supported"},
      {R"({"type":"object","patternProperties":{"^x":{}}})", "'patternProperties' at #"},
      {R"({"not":{"type":"string"}})", "'not' at #"},
      {R"({"if":{"type":"string"},"then":{"minLength":1}})", "'if' at #"},
      {R"({"type":"array","contains":{"type":"string"}})", "'contains' at #"},
      {R"({"type":"object","dependentRequired":{"a":["b"]}})", "'dependentRequired' at #"},
      {R"({"type":"object","propertyNames":{"pattern":"^a"}})", "'propertyNames' at #"},
      {R"({"type":"object","minProperties":1})", "'minProperties' at #"},
      {R"({"type":"object","maxProperties":3})", "'maxProperties' at #"},
      {R"({"type":"object","unevaluatedProperties":false})", "'unevaluatedProperties' at #"},
      {R"({"$defs":{"a":{"type":"array","items":{"type":"string","format":"email"}}},"$ref":"#/$defs/a"})",
       "'format' at #/$defs/a/items (\"email\") is not supported"},
      {R"({"type":"string","pattern":"(a)\\1"})", "'pattern' at # is not supported: backreference"},
      {R"j({"type":"string","pattern":"a(?=b)"})j", "lookaround"},
      {R"({"type":"string","pattern":"\\bword"})", "word boundary"},
      {R"({"type":"string","pattern":"a^b"})", "anchor '^' inside"},
      {R"({"type":"string","pattern":"\\p{L}"})", "Unicode property"},
      {R"({"type":"number","minimum":0.5})", "non-integer bound (0.5) on a number at #"},
      {R"({"oneOf":[{"type":"string"},{"type":"string","maxLength":3}]})", "'oneOf' at #/oneOf is not supported: branches 0 and 1"},
      {R"({"oneOf":[{"type":"number"},{"type":"integer"}]})", "'oneOf' at #/oneOf"},
      {R"({"allOf":[{"type":"string"},{"type":"integer"}]})", "branches disagree on 'type'"},
      {R"({"$ref":"http://example.com/s.json"})", "only local references"},
      {R"({"$ref":"#/$defs/missing"})", "names nothing"},
      {R"({"type":"string","pattern":"^a+$","minLength":2})", "'minLength' at # together with 'pattern'"},
      {R"({"type":"array","minItems":3,"maxItems":2})", "'minItems' at #"},
      {R"({"type":"integer","minimum":5,"maximum":4})", "leave no value"},
      {R"({"type":"frobnicate"})", "unknown type \"frobnicate\""},
      {R"({"properties":{"a":{"type":"string","maxLength":100000}}})", "'maxLength' at #/properties/a over 10000"},
      {R"({"type":"object","properties":{"a/b~c":{"type":"string","contentSchema":{},"uniqueItems":true}}})",
       "'uniqueItems' at #/properties/a~1b~0c"},
      {R"({"type":"array","items":{"anyOf":[{"type":"string"},{"not":{}}]}})", "'not' at #/items/anyOf/1"},
      {R"({"type":"string","nullable":3})", "'nullable' at # is not a boolean"},
      {R"({"anyOf":[{"type":"object","nullable":"yes"},{"type":"string"}]})", "'nullable' at #/anyOf/0 is not a boolean"},
      {"{\"type\":", "not valid JSON"},
      {"[1]", "schema at # is not an object"},
  };
  for (const auto& c : cases) {
    auto g = Grammar::from_json_schema(c.schema);
    ASSERT_FALSE(g.ok()) << c.schema;
    EXPECT_NE(g.message().find(c.expect), std::string::npos) << c.schema << "\n -> " << g.message();
    EXPECT_EQ(g.status().code(), StatusCode::kInvalid) << g.message();
  }
}

TEST(JsonSchema, AnnotationsAndUnknownKeywordsAreIgnored) {
  auto g = Grammar::from_json_schema(R"({"$schema":"https://json-schema.org/draft/2020-12/schema","$id":"x","title":"t",
      "description":"d","$comment":"c","examples":[1],"default":2,"deprecated":false,"readOnly":true,"writeOnly":false,
      "x-vendor":{"uniqueItems":true},"type":"integer"})");
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_TRUE(matches(*g, "12"));
}

TEST(JsonSchema, DeepSchemasAreRefusedNotCrashed) {
  std::string deep;
  for (int i = 0; i < 300; ++i) deep += R"({"type":"array","items":)";
  deep += "{}" + std::string(300, '}');
  auto g = Grammar::from_json_schema(deep);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.message().find("deeper"), std::string::npos) << g.message();
}

TEST(JsonSchema, ToGbnfIsTheCompiledGrammar) {
  auto g = test::schema(R"({"type":"object","properties":{"a":{"type":"integer","minimum":1,"maximum":3}},"required":["a"]})");
  std::string text = g->to_gbnf();
  EXPECT_EQ(text.rfind("root ::= ", 0), 0u) << text;
  // The text is itself a grammar that matches the same JSON.
  auto again = test::gbnf(text);
  EXPECT_TRUE(matches(again, R"({"a": 2})"));
  EXPECT_FALSE(matches(again, R"({"a": 4})"));
}

TEST(JsonObject, AnyObjectOnly) {
  auto g = Grammar::json_object();
  EXPECT_EQ(g, Grammar::json_object());  // compiled once
  for (const char* ok : {"{}", R"({"a":1})", R"({"a": [1, 2.5e3, "x", true, false, null, {"b": {}}]})", "{\n  \"k\": \"v\"\n}"})
    EXPECT_TRUE(matches(g, ok)) << ok;
  for (const char* bad : {"[]", "1", R"({"a"})", R"({"a":1,})", R"({'a':1})", "{}{}", "{\"a\":\"\x01\"}"})
    EXPECT_FALSE(matches(g, bad)) << bad;
  // Whitespace is bounded: a model cannot spin on it.
  EXPECT_FALSE(matches(g, "{" + std::string(3, ' ') + "}"));
  EXPECT_FALSE(matches(g, "{\n" + std::string(17, ' ') + "}"));
  EXPECT_TRUE(matches(g, "{\n" + std::string(16, ' ') + "}"));
}

}  // namespace
}  // namespace ll3::grammar
