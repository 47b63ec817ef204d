#pragma once
// The evaluated arguments of a call, a filter or a test, and their binding to a function's
// parameter names as Python binds them (by position, then by keyword; an unknown keyword,
// a parameter given twice or too many positional arguments is an error naming the function).
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/jinja_value.h"

namespace gatedlm::chat {

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

class BoundArgs {
 public:
  // `what` names the function in messages ("filter 'indent'"); `names` are its parameters.
  BoundArgs(const CallArgs& args, std::string what, std::initializer_list<std::string_view> names);
  // Parameter i, or undefined when the call did not give it.
  const Value& operator[](size_t i) const { return values_[i]; }
  bool given(size_t i) const { return !values_[i].is_undefined(); }
  // Parameter i, or `fallback` when not given.
  Value get_or(size_t i, Value fallback) const { return given(i) ? values_[i] : std::move(fallback); }
  // Typed reads that fail naming the function and the parameter when the value has another type.
  bool flag(size_t i, bool fallback) const;
  int64_t integer(size_t i, int64_t fallback) const;
  std::string text(size_t i, const std::string& fallback) const;
  const std::string& what() const { return what_; }

 private:
  std::string what_;
  std::vector<std::string_view> names_;
  std::vector<Value> values_;
};

// Fails unless the call has no arguments ("method 'upper' takes no arguments").
void expect_no_args(const CallArgs& args, const std::string& what);

}  // namespace gatedlm::chat
