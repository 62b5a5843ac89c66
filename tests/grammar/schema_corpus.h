// The JSON Schema corpus of the grammar tests: each schema with texts it must accept in full
// and texts it must refuse, with the offset of the first refused byte (or the text's length
// when every byte is taken but the text is incomplete).
#pragma once

#include <string>
#include <vector>

namespace ll3::grammar::test {

struct Rejected {
  std::string text;
  size_t at;  // bytes accepted before the refusal; text.size(): all taken, but not complete
};

struct SchemaCase {
  const char* name;
  std::string schema;
  std::vector<std::string> valid;
  std::vector<Rejected> invalid;
};

const std::vector<SchemaCase>& schema_corpus();

}  // namespace ll3::grammar::test
