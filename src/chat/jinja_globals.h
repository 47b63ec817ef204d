#pragma once
// The functions every chat template can call, as transformers provides them:
//   range([start,] stop[, step]); namespace(...) and dict(...) from keyword arguments (and
//   one dict); raise_exception(message), which stops the render with the template's own
//   message (TemplateError::raised_by_template); strftime_now(format), the local time.
#include "chat/jinja_interpreter.h"

namespace gatedlm::chat {

void add_globals(Scope& scope);

}  // namespace gatedlm::chat
