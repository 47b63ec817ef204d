#pragma once
// What the chat template tests share: render a template from its source, or get the message
// of the error that parsing or rendering it throws.
#include <string>

#include <nlohmann/json.hpp>

#include "chat/jinja_template.h"

namespace gatedlm::chat::jinja_testing {

inline nlohmann::ordered_json context(const char* json) { return nlohmann::ordered_json::parse(json); }

inline std::string render(const std::string& source, const nlohmann::ordered_json& variables = nullptr,
                          const RenderLimits& limits = {}) {
  return JinjaTemplate::parse(source, "test.jinja").render(variables, limits);
}

// The TemplateError's message; "(no error)" when the template renders.
inline std::string error_of(const std::string& source, const nlohmann::ordered_json& variables = nullptr,
                            const RenderLimits& limits = {}) {
  try {
    render(source, variables, limits);
  } catch (const TemplateError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace gatedlm::chat::jinja_testing
