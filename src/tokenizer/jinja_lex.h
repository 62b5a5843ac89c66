// Jinja subset: template source -> text and tag segments (jinja2's whitespace control with
// trim_blocks and lstrip_blocks), and the tokens inside a tag (internal).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ll3::jinja {

struct Segment {
  enum Kind { Text, Var, Block } kind;
  std::string text;  // the text, or the tag's inside without delimiters and modifiers
  size_t pos;
};

// Splits the source into text and tags; throws Error for an unclosed tag.
std::vector<Segment> segment(std::string src);

struct Tok {
  enum Kind { Name, Str, Int, Float, Op, End } kind;
  std::string text;
  int64_t i = 0;
  double f = 0;
  size_t pos = 0;
};

// The tokens of a tag's inside (`base`: its offset in the template, for messages).
std::vector<Tok> lex(const std::string& s, size_t base);

}  // namespace ll3::jinja
