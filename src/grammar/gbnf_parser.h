// llama.cpp's GBNF text -> compiled grammar (gbnf_parser.cpp describes the notation). Errors
// say what and where ("gbnf: line 3 column 7: ..."); input is untrusted: nesting, repetition
// counts and the grammar's size are bounded.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "grammar/grammar_impl.h"

namespace ll3::grammar {

Result<std::unique_ptr<Grammar::Impl>> parse_gbnf(const std::string& text, const std::string& root);

}  // namespace ll3::grammar
