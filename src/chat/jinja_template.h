#pragma once
// A Jinja template of our own, for chat templates (Debian has no C++ Jinja library): the
// language as Hugging Face's chat templates use it, with Python Jinja's meaning as
// transformers configures it (trim_blocks, lstrip_blocks, loop controls, its tojson,
// raise_exception and strftime_now), checked against Hugging Face's JavaScript
// implementation @huggingface/jinja (tests/reference/test_jinja_hf.py). docs/serving.md,
// "Chat templates", lists what is supported and what is refused.
//
//   const auto t = chat::JinjaTemplate::parse(source, "tokenizer_config.json");
//   std::string prompt = t.render(context);  // context: a JSON object of variables
//
// Parsed once; render is const and may run in many threads at once.
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/jinja_ast.h"
#include "chat/jinja_error.h"
#include "chat/jinja_limits.h"
#include "chat/jinja_value.h"

namespace gatedlm::chat {

class JinjaTemplate {
 public:
  // Throws TemplateError naming `origin` and the line of the first syntax error.
  static JinjaTemplate parse(std::string source, std::string origin);

  // The template rendered with the keys of `context` (a JSON object, or null for none) as its
  // variables. Throws TemplateError (origin, line, column) for an error while rendering,
  // raise_exception(...) in the template and a limit reached.
  std::string render(const nlohmann::ordered_json& context, const RenderLimits& limits = {}) const;
  // The same with the variables as values (a dict).
  std::string render_values(const Object& variables, const RenderLimits& limits = {}) const;

  const std::string& origin() const { return origin_; }
  // The source as parsed: "\r\n" and "\r" read as "\n", as Jinja reads them.
  const std::string& source() const { return *source_; }

 private:
  JinjaTemplate() = default;
  [[noreturn]] void fail_at(const EvalError& e) const;

  std::shared_ptr<const std::string> source_;
  std::string origin_;
  std::shared_ptr<const Body> body_;  // copies of a template share its parse
};

}  // namespace gatedlm::chat
