#pragma once
// The filters over collections (jinja_filters.h lists them all): length, first, last, list,
// items, dictsort, reverse, sort, unique, join, map, select, reject, selectattr, rejectattr.
#include <span>
#include <string>
#include <string_view>

#include "chat/jinja_call_args.h"
#include "chat/jinja_interpreter.h"
#include "chat/jinja_value.h"

namespace gatedlm::chat {

using FilterFn = Value (*)(Interpreter& in, const Value& operand, const CallArgs& args);
struct FilterEntry {
  std::string_view name;
  FilterFn apply;
};

std::span<const FilterEntry> list_filters();

// Jinja's attribute getter of map(attribute=), sort(attribute=), selectattr: a dotted path
// whose parts are keys or, when they are digits, list indexes ("user.name", "items.0").
Value attribute_path(const Value& item, const std::string& path);

}  // namespace gatedlm::chat
