#pragma once
// The operators of Jinja expressions on values, with Python's meaning: integers stay
// integers (// and % round toward minus infinity, as Python does), / gives a float, +
// joins strings or lists, * repeats a string, ~ joins the text of anything, comparisons
// chain; attribute and item access are lenient: a missing key, index or attribute, or
// any access on undefined, is undefined (as @huggingface/jinja; Python's Jinja raises on
// undefined.attr). Errors are EvalErrors without a position (the evaluator adds it).
#include <optional>
#include <string_view>
#include <vector>

#include "chat/jinja_ast.h"
#include "chat/jinja_value.h"

namespace gatedlm::chat {

// `and` and `or` are not here: they short-circuit in the evaluator. Strings longer than
// max_text_bytes are refused before they are made.
Value binary_operation(BinaryOp op, const Value& a, const Value& b, size_t max_text_bytes);
bool compare(CompareOp op, const Value& a, const Value& b);
// Python's `needle in haystack` (a substring, a list item, a dict key; nothing is in undefined).
bool contains(const Value& haystack, const Value& needle);
Value negate(const Value& v);

Value get_attribute(const Value& object, std::string_view name);
Value get_item(const Value& object, const Value& key);
// object[start:stop:step] of a list or string, each part optional as in Python.
Value slice(const Value& object, std::optional<int64_t> start, std::optional<int64_t> stop,
            std::optional<int64_t> step);

// What `for x in v` walks: a list's items, a dict's keys, a string's characters, and nothing
// for undefined (as Jinja); anything else is an error.
std::vector<Value> iteration_items(const Value& v);

// A value that is not of the type an operation needs: "'foo' is undefined" when it is an
// undefined value that knows its name, else "<what> needs <wanted>, not <its type>".
[[noreturn]] void fail_type(const Value& v, std::string_view what, std::string_view wanted);

}  // namespace gatedlm::chat
