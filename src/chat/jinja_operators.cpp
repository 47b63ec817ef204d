#include "chat/jinja_operators.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "chat/jinja_error.h"
#include "chat/jinja_text.h"

namespace gatedlm::chat {

void fail_type(const Value& v, std::string_view what, std::string_view wanted) {
  if (v.is_undefined() && !v.undefined_hint().empty()) throw EvalError(v.undefined_hint());
  throw EvalError(cat(what, " needs ", wanted, ", not ", type_name(v)));
}

namespace {

const char* op_symbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::add: return "+";
    case BinaryOp::subtract: return "-";
    case BinaryOp::multiply: return "*";
    case BinaryOp::divide: return "/";
    case BinaryOp::floor_divide: return "//";
    case BinaryOp::modulo: return "%";
    case BinaryOp::power: return "**";
    case BinaryOp::concat: return "~";
    case BinaryOp::logical_and: return "and";
    case BinaryOp::logical_or: return "or";
  }
  return "?";
}

[[noreturn]] void fail_operands(BinaryOp op, const Value& a, const Value& b) {
  for (const Value* v : {&a, &b})
    if (v->is_undefined() && !v->undefined_hint().empty()) throw EvalError(v->undefined_hint());
  throw EvalError(cat("'", op_symbol(op), "' cannot combine ", type_name(a), " and ", type_name(b)));
}

int64_t int_of(const Value& v) { return v.is_int() ? v.as_int() : int64_t{v.as_bool()}; }

// Python's integer arithmetic within 64 bits (Python's integers have no limit: a result
// beyond 64 bits is an error here rather than a wrong number).
Value integer_operation(BinaryOp op, int64_t x, int64_t y) {
  int64_t r = 0;
  bool overflow = false;
  switch (op) {
    case BinaryOp::add: overflow = __builtin_add_overflow(x, y, &r); break;
    case BinaryOp::subtract: overflow = __builtin_sub_overflow(x, y, &r); break;
    case BinaryOp::multiply: overflow = __builtin_mul_overflow(x, y, &r); break;
    case BinaryOp::floor_divide:
    case BinaryOp::modulo: {
      if (y == 0) throw EvalError("integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) throw EvalError("integer overflow (beyond 64 bits)");
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) --q, m += y;  // toward minus infinity, as Python
      return Value::integer(op == BinaryOp::floor_divide ? q : m);
    }
    case BinaryOp::power: {
      if (y < 0) return Value::floating(std::pow(static_cast<double>(x), static_cast<double>(y)));
      r = 1;
      for (int64_t base = x, e = y; e > 0 && !overflow; e >>= 1) {
        if (e & 1) overflow = __builtin_mul_overflow(r, base, &r);
        if (e > 1 && !overflow) overflow = __builtin_mul_overflow(base, base, &base);
      }
      break;
    }
    default: break;
  }
  if (overflow) throw EvalError("integer overflow (beyond 64 bits)");
  return Value::integer(r);
}

Value float_operation(BinaryOp op, double x, double y) {
  switch (op) {
    case BinaryOp::add: return Value::floating(x + y);
    case BinaryOp::subtract: return Value::floating(x - y);
    case BinaryOp::multiply: return Value::floating(x * y);
    case BinaryOp::divide:
    case BinaryOp::floor_divide:
    case BinaryOp::modulo: {
      if (y == 0) throw EvalError("float division by zero");
      if (op == BinaryOp::divide) return Value::floating(x / y);
      if (op == BinaryOp::floor_divide) return Value::floating(std::floor(x / y));
      double m = std::fmod(x, y);
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      return Value::floating(m);
    }
    case BinaryOp::power: {
      if (x == 0 && y < 0) throw EvalError("zero cannot be raised to a negative power");
      const double r = std::pow(x, y);
      if (std::isnan(r) && !std::isnan(x) && !std::isnan(y))
        throw EvalError("a negative number to a fractional power has no real value");
      return Value::floating(r);
    }
    default: return Value::floating(0);
  }
}

Value repeat_text(const std::string& text, int64_t times, size_t max_text_bytes) {
  if (times <= 0 || text.empty()) return Value::string("");
  if (static_cast<uint64_t>(times) > max_text_bytes / text.size())
    throw EvalError(cat("repeating a string ", times, " times passes the output limit of ", max_text_bytes, " bytes"));
  std::string out;
  out.reserve(text.size() * static_cast<size_t>(times));
  for (int64_t i = 0; i < times; ++i) out += text;
  return Value::string(std::move(out));
}

Value join_values(const Value& a, const Value& b, size_t max_text_bytes) {
  if (a.is_string() && b.is_string()) {
    if (a.as_string().size() + b.as_string().size() > max_text_bytes)
      throw EvalError(cat("a string would pass the output limit of ", max_text_bytes, " bytes"));
    return Value::string(a.as_string() + b.as_string());
  }
  if (a.is_tuple() != b.is_tuple()) throw EvalError("'+' cannot join a list and a tuple");
  Array items = a.as_array();
  items.insert(items.end(), b.as_array().begin(), b.as_array().end());
  return a.is_tuple() ? Value::tuple(std::move(items)) : Value::array(std::move(items));
}

}  // namespace

Value binary_operation(BinaryOp op, const Value& a, const Value& b, size_t max_text_bytes) {
  if (op == BinaryOp::concat) {
    std::string left = to_text(a), right = to_text(b);
    if (left.size() + right.size() > max_text_bytes)
      throw EvalError(cat("a string would pass the output limit of ", max_text_bytes, " bytes"));
    return Value::string(left + right);
  }
  if (a.is_number() && b.is_number()) {
    if (op == BinaryOp::divide) return float_operation(op, a.as_double(), b.as_double());
    if (a.is_float() || b.is_float()) return float_operation(op, a.as_double(), b.as_double());
    return integer_operation(op, int_of(a), int_of(b));
  }
  if (op == BinaryOp::add && a.type() == b.type() && (a.is_string() || a.is_array()))
    return join_values(a, b, max_text_bytes);
  if (op == BinaryOp::multiply && a.is_string() && (b.is_int() || b.is_bool()))
    return repeat_text(a.as_string(), int_of(b), max_text_bytes);
  if (op == BinaryOp::multiply && b.is_string() && (a.is_int() || a.is_bool()))
    return repeat_text(b.as_string(), int_of(a), max_text_bytes);
  if (op == BinaryOp::modulo && a.is_string()) throw EvalError("string formatting with '%' is not supported");
  fail_operands(op, a, b);
}

namespace {

// -1, 0 or 1 as Python orders numbers, strings (by code point) and lists (item by item).
int order(const Value& a, const Value& b, int depth) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() < b.as_double() ? -1 : a.as_double() > b.as_double();
    return int_of(a) < int_of(b) ? -1 : int_of(a) > int_of(b);
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.as_string().compare(b.as_string());  // UTF-8 bytes order as code points do
    return c < 0 ? -1 : c > 0;
  }
  if (a.is_array() && b.is_array() && depth < kMaxValueDepth) {
    const Array &x = a.as_array(), &y = b.as_array();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (!values_equal(x[i], y[i])) return order(x[i], y[i], depth + 1);
    return x.size() < y.size() ? -1 : x.size() > y.size();
  }
  for (const Value* v : {&a, &b})
    if (v->is_undefined() && !v->undefined_hint().empty()) throw EvalError(v->undefined_hint());
  throw EvalError(cat("cannot order ", type_name(a), " and ", type_name(b)));
}

}  // namespace

bool contains(const Value& haystack, const Value& needle) {
  switch (haystack.type()) {
    case Value::Type::string:
      if (!needle.is_string()) throw EvalError(cat("'in <string>' needs a string on its left, not ", type_name(needle)));
      return haystack.as_string().find(needle.as_string()) != std::string::npos;
    case Value::Type::array:
      for (const Value& item : haystack.as_array())
        if (values_equal(item, needle)) return true;
      return false;
    case Value::Type::object: return needle.is_string() && haystack.as_object().find(needle.as_string()) != nullptr;
    case Value::Type::undefined: return false;
    default: fail_type(haystack, "'in'", "a string, list or dict on its right");
  }
}

bool compare(CompareOp op, const Value& a, const Value& b) {
  switch (op) {
    case CompareOp::eq: return values_equal(a, b);
    case CompareOp::ne: return !values_equal(a, b);
    case CompareOp::lt: return order(a, b, 0) < 0;
    case CompareOp::le: return order(a, b, 0) <= 0;
    case CompareOp::gt: return order(a, b, 0) > 0;
    case CompareOp::ge: return order(a, b, 0) >= 0;
    case CompareOp::in: return contains(b, a);
    case CompareOp::not_in: return !contains(b, a);
  }
  return false;
}

Value negate(const Value& v) {
  if (v.is_float()) return Value::floating(-v.as_float());
  if (v.is_int() || v.is_bool()) {
    if (int_of(v) == INT64_MIN) throw EvalError("integer overflow (beyond 64 bits)");
    return Value::integer(-int_of(v));
  }
  fail_type(v, "unary '-'", "a number");
}

Value get_attribute(const Value& object, std::string_view name) {
  const Value* found = nullptr;
  if (object.is_object()) found = object.as_object().find(name);
  if (object.is_namespace()) found = object.as_namespace().fields.find(name);
  if (found != nullptr) return *found;
  return Value::undefined(cat(type_name(object), " has no attribute '", name, "'"));
}

Value get_item(const Value& object, const Value& key) {
  if (key.is_string() && (object.is_object() || object.is_namespace())) return get_attribute(object, key.as_string());
  if ((key.is_int() || key.is_bool()) && (object.is_array() || object.is_string())) {
    int64_t i = int_of(key);
    if (object.is_array()) {
      const Array& items = object.as_array();
      if (i < 0) i += static_cast<int64_t>(items.size());
      if (i >= 0 && i < static_cast<int64_t>(items.size())) return items[static_cast<size_t>(i)];
    } else {
      const std::vector<std::string_view> chars = characters(object.as_string());
      if (i < 0) i += static_cast<int64_t>(chars.size());
      if (i >= 0 && i < static_cast<int64_t>(chars.size())) return Value::string(std::string(chars[static_cast<size_t>(i)]));
    }
    return Value::undefined(cat(type_name(object), " index ", int_of(key), " out of range"));
  }
  return Value::undefined(cat(type_name(object), " has no item ", to_repr(key)));
}

Value slice(const Value& object, std::optional<int64_t> start, std::optional<int64_t> stop,
            std::optional<int64_t> step) {
  if (!object.is_array() && !object.is_string()) fail_type(object, "slicing", "a list or a string");
  const int64_t by = step.value_or(1);
  if (by == 0) throw EvalError("slice step cannot be zero");
  std::vector<std::string_view> chars;
  if (object.is_string()) chars = characters(object.as_string());
  const int64_t n = static_cast<int64_t>(object.is_array() ? object.as_array().size() : chars.size());
  // Python's slice.indices: negative bounds count from the end, then clamp.
  const auto clamp = [&](std::optional<int64_t> v, int64_t fallback) {
    if (!v) return fallback;
    int64_t i = *v < 0 ? *v + n : *v;
    if (by > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  const int64_t from = clamp(start, by > 0 ? 0 : n - 1), to = clamp(stop, by > 0 ? n : -1);
  Array items;
  std::string text;
  for (int64_t i = from; by > 0 ? i < to : i > to; i += by) {
    if (object.is_array())
      items.push_back(object.as_array()[static_cast<size_t>(i)]);
    else
      text += chars[static_cast<size_t>(i)];
  }
  if (object.is_string()) return Value::string(std::move(text));
  return object.is_tuple() ? Value::tuple(std::move(items)) : Value::array(std::move(items));
}

std::vector<Value> iteration_items(const Value& v) {
  switch (v.type()) {
    case Value::Type::array: return v.as_array();
    case Value::Type::undefined: return {};
    case Value::Type::object: {
      std::vector<Value> keys;
      for (const auto& entry : v.as_object().entries()) keys.push_back(Value::string(entry.first));
      return keys;
    }
    case Value::Type::string: {
      std::vector<Value> chars;
      for (std::string_view c : characters(v.as_string())) chars.push_back(Value::string(std::string(c)));
      return chars;
    }
    default: throw EvalError(cat("cannot loop over ", type_name(v)));
  }
}

}  // namespace gatedlm::chat
