#include "chat/jinja_globals.h"

#include <ctime>
#include <memory>
#include <string>

#include "chat/jinja_error.h"
#include "chat/jinja_operators.h"

namespace gatedlm::chat {

namespace {

int64_t range_bound(const Value& v) {
  if (v.is_int()) return v.as_int();
  if (v.is_bool()) return v.as_bool();
  fail_type(v, "range()", "integers");
}

Value range_function(Interpreter& in, const CallArgs& args) {
  if (!args.keyword.empty()) throw EvalError("range() takes no keyword arguments");
  const auto& p = args.positional;
  if (p.empty() || p.size() > 3) throw EvalError(cat("range() takes 1 to 3 arguments, got ", p.size()));
  const int64_t start = p.size() == 1 ? 0 : range_bound(p[0]);
  const int64_t stop = range_bound(p.size() == 1 ? p[0] : p[1]);
  const int64_t step = p.size() == 3 ? range_bound(p[2]) : 1;
  if (step == 0) throw EvalError("range() step must not be zero");
  // Its length first, in wide arithmetic: range(10**18) must be refused, not allocated.
  const __int128 span = step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
  const __int128 stride = step > 0 ? step : -static_cast<__int128>(step);
  const __int128 count = span <= 0 ? 0 : (span + stride - 1) / stride;
  in.check_list_size(count > INT64_MAX ? static_cast<size_t>(-1) : static_cast<size_t>(count));
  Array items;
  items.reserve(static_cast<size_t>(count));
  for (__int128 i = 0; i < count; ++i) items.push_back(Value::integer(static_cast<int64_t>(start + i * step)));
  return Value::array(std::move(items));
}

// dict(mapping, **kwargs) as Python builds it: the mapping's pairs, then the keywords.
Object fields_of(const CallArgs& args, const char* what) {
  if (args.positional.size() > 1) throw EvalError(cat(what, " takes at most one positional argument"));
  Object fields;
  if (!args.positional.empty()) {
    const Value& source = args.positional[0];
    if (!source.is_object()) fail_type(source, what, "a dict as its positional argument");
    for (const auto& [key, value] : source.as_object().entries()) fields.set(key, value);
  }
  for (const auto& [key, value] : args.keyword) fields.set(key, value);
  return fields;
}

Value namespace_function(Interpreter& in, const CallArgs& args) {
  std::shared_ptr<Namespace> ns = in.make_namespace();
  ns->fields = fields_of(args, "namespace()");
  return Value::name_space(std::move(ns));
}

Value raise_exception_function(Interpreter&, const CallArgs& args) {
  const BoundArgs bound(args, "raise_exception()", {"message"});
  throw EvalError(to_text(bound[0]), kNoOffset, true);
}

Value strftime_now_function(Interpreter&, const CallArgs& args) {
  const BoundArgs bound(args, "strftime_now()", {"format"});
  if (!bound[0].is_string()) fail_type(bound[0], "strftime_now()", "a format string");
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::string out(64 + bound[0].as_string().size() * 4, '\0');
  out.resize(std::strftime(out.data(), out.size(), bound[0].as_string().c_str(), &local));
  return Value::string(std::move(out));
}

void add_function(Scope& scope, const std::string& name, Value (*fn)(Interpreter&, const CallArgs&)) {
  auto callable = std::make_shared<Callable>();
  callable->name = name;
  callable->call = fn;
  scope.vars[name] = Value::callable(std::move(callable));
}

}  // namespace

void add_globals(Scope& scope) {
  add_function(scope, "range", range_function);
  add_function(scope, "namespace", namespace_function);
  add_function(scope, "dict", [](Interpreter&, const CallArgs& args) { return Value::object(fields_of(args, "dict()")); });
  add_function(scope, "raise_exception", raise_exception_function);
  add_function(scope, "strftime_now", strftime_now_function);
}

}  // namespace gatedlm::chat
