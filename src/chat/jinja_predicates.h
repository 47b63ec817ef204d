#pragma once
// Jinja's tests, `x is name` / `x is not name` / `x is name(arg)` / `x is name arg`:
// defined, undefined, none, boolean, true, false, integer, float, number, string, mapping,
// iterable, sequence, callable, lower, upper, even, odd, divisibleby, in, and the
// comparisons eq (equalto, ==), ne (!=), lt (lessthan, <), le (<=), gt (greaterthan, >),
// ge (>=). With Python's meaning: True is a number, a dict is iterable and a sequence
// (and so is undefined, as in Jinja).
#include <string_view>

#include "chat/jinja_call_args.h"
#include "chat/jinja_value.h"

namespace gatedlm::chat {

// Throws EvalError for an unknown test or wrong arguments.
bool apply_test(std::string_view name, const Value& v, const CallArgs& args);

}  // namespace gatedlm::chat
