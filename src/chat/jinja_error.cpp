#include "chat/jinja_error.h"

#include <utility>

#include "chat/jinja_text.h"

namespace gatedlm::chat {

namespace {

std::string error_message(const std::string& origin, size_t line, size_t column, const std::string& detail) {
  if (line == 0) return cat("chat template ", origin, ": ", detail);
  return cat("chat template ", origin, ": line ", line, ", column ", column, ": ", detail);
}

}  // namespace

TemplateError::TemplateError(std::string origin_name, size_t line_number, size_t column_number,
                             std::string what_went_wrong, bool by_template)
    : Error(error_message(origin_name, line_number, column_number, what_went_wrong)),
      origin(std::move(origin_name)),
      line(line_number),
      column(column_number),
      detail(std::move(what_went_wrong)),
      raised_by_template(by_template) {}

SourcePosition position_in(std::string_view source, size_t offset) {
  if (offset > source.size()) offset = source.size();
  const std::string_view before = source.substr(0, offset);
  const size_t line_start = before.rfind('\n') == std::string_view::npos ? 0 : before.rfind('\n') + 1;
  size_t line = 1;
  for (char c : before) line += c == '\n';
  return {line, count_characters(before.substr(line_start)) + 1};
}

}  // namespace gatedlm::chat
