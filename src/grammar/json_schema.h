// JSON Schema -> GBNF text (json_schema.cpp): the grammar of JSON texts valid under the
// schema. What the schema asks and the grammar cannot enforce exactly is refused, naming the
// keyword and its JSON pointer ("'uniqueItems' at #/properties/tags is not supported").
#pragma once

#include <string>

#include "core/status.h"

namespace ll3::grammar {

Result<std::string> json_schema_to_gbnf(const std::string& schema);
// Any JSON object (response_format json_object).
std::string json_object_gbnf();

}  // namespace ll3::grammar
