#pragma once
// The errors of a chat template. Callers see TemplateError, whose message names the
// template's origin and the line and column at fault:
//   chat template tokenizer_config.json: line 12, column 4: unexpected 'endfor' (no open 'for')
// Inside the engine, code that does not know where it is (a filter, an operator) throws
// EvalError with the message alone; the evaluator adds the position of the expression or
// statement it was evaluating, and JinjaTemplate turns that into a line and column.
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

#include "core/error.h"

namespace gatedlm::chat {

constexpr size_t kNoOffset = static_cast<size_t>(-1);

struct EvalError : std::runtime_error {
  explicit EvalError(const std::string& message, size_t offset_in_source = kNoOffset, bool by_template = false)
      : std::runtime_error(message), offset(offset_in_source), raised_by_template(by_template) {}
  size_t offset;  // byte offset in the template's source; kNoOffset until a node claims it
  bool raised_by_template;  // raise_exception(...) in the template
};

struct TemplateError : Error {
  TemplateError(std::string origin_name, size_t line_number, size_t column_number, std::string what_went_wrong,
                bool by_template);
  std::string origin;  // where the template came from, as the caller named it
  size_t line;         // 1-based; 0 when the error has no place in the source (a limit at the end)
  size_t column;       // 1-based, in characters
  std::string detail;  // the message without the origin and position
  // True for the template's own raise_exception(message): the client's input is at fault
  // (a server answers 400), not the engine or the template's syntax.
  bool raised_by_template;
};

// The 1-based line and column (in characters) of a byte offset in source.
struct SourcePosition {
  size_t line;
  size_t column;
};
SourcePosition position_in(std::string_view source, size_t offset);

}  // namespace gatedlm::chat
