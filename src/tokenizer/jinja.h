// A Jinja subset interpreter for chat templates: the syntax and the built-ins the published
// Llama 3 / 3.1 / 3.2 templates (and most others) use, rendered the way Hugging Face
// transformers configures Python's jinja2 (trim_blocks, lstrip_blocks, its tojson,
// raise_exception, strftime_now, loop controls), so outputs are byte-identical.
#pragma once

#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"

namespace ll3::jinja {

struct Template;

struct TemplateDeleter {
  void operator()(Template* t) const;
};
using TemplatePtr = std::unique_ptr<Template, TemplateDeleter>;

// Parses `source`; a syntax error or an unsupported construct gives a Status naming the offset.
Result<TemplatePtr> parse(const std::string& source);

struct RenderLimits {
  size_t max_output_bytes = size_t(64) << 20;
  uint64_t max_steps = 5'000'000;  // loop iterations + output nodes: bounds hostile templates
};

// Renders with the variables in `context` (a JSON object). `now` is what strftime_now() formats
// (local time, like Python's datetime.now()). Errors (raise_exception, undefined use, a type
// error) give a Status.
Result<std::string> render(const Template& t, const nlohmann::ordered_json& context,
                           std::time_t now, const RenderLimits& limits = {});

}  // namespace ll3::jinja
