#pragma once
// Jinja's filters, `value|name` and `value|name(args)`, with Python Jinja's meaning and
// transformers' tojson:
//   text: trim, upper, lower, title, capitalize, replace, indent, string, safe;
//   numbers: int, float, abs, round;
//   collections: length (count), first, last, list, items, dictsort, reverse, sort, unique,
//     join, map, select, reject, selectattr, rejectattr;
//   default (d), tojson.
// Not provided (a clear error names them): the HTML ones (escape, e, urlize, striptags),
// which @huggingface/jinja lacks as well, and format, groupby, batch, sum, min, max.
#include <string_view>

#include "chat/jinja_call_args.h"
#include "chat/jinja_interpreter.h"
#include "chat/jinja_value.h"

namespace gatedlm::chat {

Value apply_filter(Interpreter& in, std::string_view name, const Value& operand, const CallArgs& args);

}  // namespace gatedlm::chat
