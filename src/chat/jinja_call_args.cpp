#include "chat/jinja_call_args.h"

#include <algorithm>

#include "chat/jinja_error.h"

namespace gatedlm::chat {

BoundArgs::BoundArgs(const CallArgs& args, std::string what, std::initializer_list<std::string_view> names)
    : what_(std::move(what)), names_(names), values_(names.size()) {
  if (args.positional.size() > names_.size())
    throw EvalError(cat(what_, " takes at most ", names_.size(), " argument(s), got ", args.positional.size()));
  for (size_t i = 0; i < args.positional.size(); ++i) values_[i] = args.positional[i];
  for (const auto& [key, value] : args.keyword) {
    const auto it = std::find(names_.begin(), names_.end(), key);
    if (it == names_.end()) throw EvalError(cat(what_, " has no parameter '", key, "'"));
    const size_t i = static_cast<size_t>(it - names_.begin());
    if (i < args.positional.size()) throw EvalError(cat(what_, " got the argument '", key, "' twice"));
    values_[i] = value;
  }
}

bool BoundArgs::flag(size_t i, bool fallback) const {
  if (!given(i)) return fallback;
  if (!values_[i].is_bool())
    throw EvalError(cat(what_, ": '", names_[i], "' must be a boolean, not ", type_name(values_[i])));
  return values_[i].as_bool();
}

int64_t BoundArgs::integer(size_t i, int64_t fallback) const {
  if (!given(i)) return fallback;
  if (!values_[i].is_int())
    throw EvalError(cat(what_, ": '", names_[i], "' must be an integer, not ", type_name(values_[i])));
  return values_[i].as_int();
}

std::string BoundArgs::text(size_t i, const std::string& fallback) const {
  if (!given(i)) return fallback;
  if (!values_[i].is_string())
    throw EvalError(cat(what_, ": '", names_[i], "' must be a string, not ", type_name(values_[i])));
  return values_[i].as_string();
}

void expect_no_args(const CallArgs& args, const std::string& what) {
  if (!args.positional.empty() || !args.keyword.empty()) throw EvalError(cat(what, " takes no arguments"));
}

}  // namespace gatedlm::chat
