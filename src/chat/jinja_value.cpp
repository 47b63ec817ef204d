#include "chat/jinja_value.h"

#include "chat/jinja_error.h"
#include "chat/jinja_text.h"

namespace gatedlm::chat {

const Value* Object::find(std::string_view key) const {
  const auto it = index_.find(key);
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

void Object::set(const std::string& key, Value value) {
  const auto it = index_.find(std::string_view(key));
  if (it != index_.end()) {
    entries_[it->second].second = std::move(value);
    return;
  }
  index_.emplace(key, entries_.size());
  entries_.emplace_back(key, std::move(value));
}

Value Value::undefined(std::string hint) { return holding(UndefinedTag{std::move(hint)}); }
Value Value::none() { return holding(nullptr); }
Value Value::boolean(bool b) { return holding(b); }
Value Value::integer(int64_t i) { return holding(i); }
Value Value::floating(double d) { return holding(d); }
Value Value::string(std::string s) { return holding(std::move(s)); }
Value Value::array(Array items) { return holding(std::make_shared<const Sequence>(Sequence{std::move(items), false})); }
Value Value::tuple(Array items) { return holding(std::make_shared<const Sequence>(Sequence{std::move(items), true})); }
Value Value::object(Object fields) { return holding(std::make_shared<const Object>(std::move(fields))); }
Value Value::name_space(std::shared_ptr<Namespace> ns) { return holding(std::move(ns)); }
Value Value::callable(std::shared_ptr<const Callable> c) { return holding(std::move(c)); }

double Value::as_double() const {
  if (is_int()) return static_cast<double>(as_int());
  if (is_bool()) return as_bool() ? 1.0 : 0.0;
  return as_float();
}

bool Value::truthy() const {
  switch (type()) {
    case Type::undefined:
    case Type::none: return false;
    case Type::boolean: return as_bool();
    case Type::integer: return as_int() != 0;
    case Type::floating: return as_float() != 0.0;
    case Type::string: return !as_string().empty();
    case Type::array: return !as_array().empty();
    case Type::object: return !as_object().empty();
    case Type::name_space:
    case Type::callable: return true;
  }
  return false;
}

const char* type_name(Value::Type type) {
  switch (type) {
    case Value::Type::undefined: return "undefined";
    case Value::Type::none: return "none";
    case Value::Type::boolean: return "boolean";
    case Value::Type::integer: return "integer";
    case Value::Type::floating: return "float";
    case Value::Type::string: return "string";
    case Value::Type::array: return "list";
    case Value::Type::object: return "dict";
    case Value::Type::name_space: return "namespace";
    case Value::Type::callable: return "callable";
  }
  return "value";
}

namespace {

void check_depth(int depth) {
  // Only a namespace can hold itself (`set ns.self = ns`); printing it would never end.
  if (depth > kMaxValueDepth) throw EvalError(cat("a value nests deeper than ", kMaxValueDepth, " levels"));
}

void append_text(std::string& out, const Value& v, bool quoted, int depth);

void append_fields(std::string& out, const Object& fields, int depth) {
  out += '{';
  bool first = true;
  for (const auto& [key, value] : fields.entries()) {
    if (!first) out += ", ";
    first = false;
    out += python_quoted(key);
    out += ": ";
    append_text(out, value, true, depth + 1);
  }
  out += '}';
}

void append_text(std::string& out, const Value& v, bool quoted, int depth) {
  check_depth(depth);
  switch (v.type()) {
    case Value::Type::undefined: break;
    case Value::Type::none: out += "None"; break;
    case Value::Type::boolean: out += v.as_bool() ? "True" : "False"; break;
    case Value::Type::integer: out += std::to_string(v.as_int()); break;
    case Value::Type::floating: out += python_float(v.as_float()); break;
    case Value::Type::string: out += quoted ? python_quoted(v.as_string()) : v.as_string(); break;
    case Value::Type::array: {
      out += v.is_tuple() ? '(' : '[';
      bool first = true;
      for (const Value& item : v.as_array()) {
        if (!first) out += ", ";
        first = false;
        append_text(out, item, true, depth + 1);
      }
      if (v.is_tuple() && v.as_array().size() == 1) out += ',';  // (1,)
      out += v.is_tuple() ? ')' : ']';
      break;
    }
    case Value::Type::object: append_fields(out, v.as_object(), depth); break;
    case Value::Type::name_space:
      out += "<Namespace ";
      append_fields(out, v.as_namespace().fields, depth);
      out += '>';
      break;
    case Value::Type::callable: out += "<function " + v.as_callable().name + ">"; break;
  }
}

bool equal_at(const Value& a, const Value& b, int depth);

bool objects_equal(const Object& a, const Object& b, int depth) {
  // Python's dicts compare as sets of pairs: the order of the keys does not matter.
  if (a.size() != b.size()) return false;
  for (const auto& [key, value] : a.entries()) {
    const Value* other = b.find(key);
    if (other == nullptr || !equal_at(value, *other, depth + 1)) return false;
  }
  return true;
}

bool equal_at(const Value& a, const Value& b, int depth) {
  check_depth(depth);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return (a.is_int() ? a.as_int() : int64_t{a.as_bool()}) == (b.is_int() ? b.as_int() : int64_t{b.as_bool()});
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case Value::Type::undefined:
    case Value::Type::none: return true;
    case Value::Type::string: return a.as_string() == b.as_string();
    case Value::Type::array: {
      const Array &x = a.as_array(), &y = b.as_array();
      if (x.size() != y.size() || a.is_tuple() != b.is_tuple()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!equal_at(x[i], y[i], depth + 1)) return false;
      return true;
    }
    case Value::Type::object: return objects_equal(a.as_object(), b.as_object(), depth);
    case Value::Type::name_space: return a.namespace_ptr() == b.namespace_ptr();
    case Value::Type::callable: return &a.as_callable() == &b.as_callable();
    default: return false;  // numbers were compared above
  }
}

}  // namespace

std::string to_text(const Value& v) {
  if (v.is_string()) return v.as_string();
  std::string out;
  append_text(out, v, false, 0);
  return out;
}

std::string to_repr(const Value& v) {
  std::string out;
  append_text(out, v, true, 0);
  return out;
}

bool values_equal(const Value& a, const Value& b) { return equal_at(a, b, 0); }

}  // namespace gatedlm::chat
