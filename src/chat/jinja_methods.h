#pragma once
// The Python methods templates call on values, with Python's meaning:
//   str: upper, lower, title, capitalize, strip, lstrip, rstrip (each with optional chars),
//        startswith, endswith (a string or a list of them), split(sep=None, maxsplit=-1),
//        replace(old, new, count=-1), find, count, join;
//   dict: get(key, default=None), items, keys, values.
// Case mapping covers ASCII letters only (other characters are kept).
#include <string_view>

#include "chat/jinja_call_args.h"
#include "chat/jinja_interpreter.h"
#include "chat/jinja_value.h"

namespace gatedlm::chat {

// Calls object.name(args) into result and returns true, or returns false when the value's
// type has no such method. Throws EvalError for wrong arguments.
bool call_method(Interpreter& in, const Value& object, std::string_view name, const CallArgs& args, Value& result);

// str.split with Python's rules: sep empty (None) splits at runs of white space and drops
// empty parts; maxsplit < 0 splits everywhere.
Array split_text(const std::string& s, const Value& sep, int64_t maxsplit);
// str.replace: count < 0 replaces all; an empty `from` inserts `to` between characters.
std::string replace_text(Interpreter& in, const std::string& s, const std::string& from, const std::string& to,
                         int64_t count);
// Python's str.title(): a letter after a non-letter is upper case, after a letter lower case.
std::string title_words(std::string_view s);
std::string capitalize_text(std::string_view s);

}  // namespace gatedlm::chat
