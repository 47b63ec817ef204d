#include "chat/jinja_template.h"

#include <utility>

#include "chat/jinja_globals.h"
#include "chat/jinja_interpreter.h"
#include "chat/jinja_json.h"
#include "chat/jinja_lexer.h"
#include "chat/jinja_parser.h"

namespace gatedlm::chat {

namespace {

// Jinja reads "\r\n" and "\r" as "\n" everywhere in a template, string literals included.
std::string normalize_newlines(std::string source) {
  if (source.find('\r') == std::string::npos) return source;
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] != '\r') {
      out += source[i];
    } else {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    }
  }
  return out;
}

}  // namespace

JinjaTemplate JinjaTemplate::parse(std::string source, std::string origin) {
  JinjaTemplate t;
  t.source_ = std::make_shared<const std::string>(normalize_newlines(std::move(source)));
  t.origin_ = std::move(origin);
  try {
    t.body_ = std::make_shared<const Body>(parse_template(tokenize(*t.source_), *t.source_));
  } catch (const EvalError& e) {
    t.fail_at(e);
  }
  return t;
}

void JinjaTemplate::fail_at(const EvalError& e) const {
  if (e.offset == kNoOffset) throw TemplateError(origin_, 0, 0, e.what(), e.raised_by_template);
  const SourcePosition at = position_in(*source_, e.offset);
  throw TemplateError(origin_, at.line, at.column, e.what(), e.raised_by_template);
}

std::string JinjaTemplate::render_values(const Object& variables, const RenderLimits& limits) const {
  try {
    auto globals = std::make_shared<Scope>();
    add_globals(*globals);
    // The context comes after the globals, so a variable of the caller's hides a global.
    for (const auto& [name, value] : variables.entries()) globals->vars[name] = value;
    Interpreter interpreter(limits);
    return interpreter.render(*body_, globals);
  } catch (const EvalError& e) {
    fail_at(e);
  }
}

std::string JinjaTemplate::render(const nlohmann::ordered_json& context, const RenderLimits& limits) const {
  if (!context.is_object() && !context.is_null())
    throw TemplateError(origin_, 0, 0, "the context must be a JSON object of variables", false);
  Value variables;
  try {
    variables = context.is_null() ? Value::object({}) : value_from_json(context);
  } catch (const EvalError& e) {
    fail_at(e);
  }
  return render_values(variables.as_object(), limits);
}

}  // namespace gatedlm::chat
