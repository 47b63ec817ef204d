#pragma once
// The values a chat template computes with: Python's as Jinja sees them (undefined, None,
// bool, int, float, str, list, dict), a namespace() object and callables (macros and the
// global functions). Lists and dicts are immutable once built, as in transformers' sandboxed
// environment, so copies share them; a namespace is the one mutable value (`set ns.x = ...`)
// and is shared by reference, as in Python.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace gatedlm::chat {

class Value;
class Interpreter;
struct CallArgs;

using Array = std::vector<Value>;

// String-keyed map that keeps its insertion order (a tool's JSON schema renders its keys in
// the order the client sent them, as Python's dict does).
class Object {
 public:
  const Value* find(std::string_view key) const;
  // Replaces the value of an existing key in place, else appends the key.
  void set(const std::string& key, Value value);
  // Defined below Value: the vector's size needs the complete type (clang with libstdc++
  // instantiates it here, where gcc waits).
  size_t size() const;
  bool empty() const;
  const std::vector<std::pair<std::string, Value>>& entries() const { return entries_; }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::vector<std::pair<std::string, Value>> entries_;
  std::unordered_map<std::string, size_t, Hash, std::equal_to<>> index_;
};

// The object namespace(...) returns: attributes assigned with `set ns.name = value`.
struct Namespace {
  Object fields;
};

// A macro or a global function. `call` receives the interpreter (macros render through it,
// and it counts their calls against the limits).
struct Callable {
  std::string name;
  std::function<Value(Interpreter&, const CallArgs&)> call;
};

class Value {
 public:
  enum class Type { undefined, none, boolean, integer, floating, string, array, object, name_space, callable };

  Value() = default;  // undefined
  static Value undefined(std::string hint = {});
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value floating(double d);
  static Value string(std::string s);
  static Value array(Array items);
  // A Python tuple: a list that prints as (a, b) and is not equal to the list [a, b].
  static Value tuple(Array items);
  static Value object(Object fields);
  static Value name_space(std::shared_ptr<Namespace> ns);
  static Value callable(std::shared_ptr<const Callable> c);

  Type type() const { return static_cast<Type>(v_.index()); }
  bool is_undefined() const { return type() == Type::undefined; }
  bool is_none() const { return type() == Type::none; }
  bool is_bool() const { return type() == Type::boolean; }
  bool is_int() const { return type() == Type::integer; }
  bool is_float() const { return type() == Type::floating; }
  // int, float or bool: Python's bool is an int.
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return type() == Type::string; }
  bool is_array() const { return type() == Type::array; }  // lists and tuples
  bool is_tuple() const { return is_array() && std::get<std::shared_ptr<const Sequence>>(v_)->tuple; }
  bool is_object() const { return type() == Type::object; }
  bool is_namespace() const { return type() == Type::name_space; }
  bool is_callable() const { return type() == Type::callable; }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return std::get<int64_t>(v_); }
  double as_float() const { return std::get<double>(v_); }
  // int, float or bool as a double.
  double as_double() const;
  const std::string& as_string() const { return std::get<std::string>(v_); }
  const Array& as_array() const { return std::get<std::shared_ptr<const Sequence>>(v_)->items; }
  const Object& as_object() const { return *std::get<std::shared_ptr<const Object>>(v_); }
  Namespace& as_namespace() const { return *std::get<std::shared_ptr<Namespace>>(v_); }
  const std::shared_ptr<Namespace>& namespace_ptr() const { return std::get<std::shared_ptr<Namespace>>(v_); }
  const Callable& as_callable() const { return *std::get<std::shared_ptr<const Callable>>(v_); }
  // What an undefined value stands for ("'foo' is undefined"), for messages; may be empty.
  const std::string& undefined_hint() const { return std::get<UndefinedTag>(v_).hint; }

  // Python's truth: undefined, None, False, 0, 0.0, "" and empty lists and dicts are false.
  bool truthy() const;

 private:
  struct UndefinedTag {
    std::string hint;
  };
  struct Sequence {
    Array items;
    bool tuple = false;
  };
  template <typename T>
  static Value holding(T x) {
    Value v;
    v.v_ = std::move(x);
    return v;
  }
  std::variant<UndefinedTag, std::nullptr_t, bool, int64_t, double, std::string, std::shared_ptr<const Sequence>,
               std::shared_ptr<const Object>, std::shared_ptr<Namespace>, std::shared_ptr<const Callable>>
      v_;
};

inline size_t Object::size() const { return entries_.size(); }
inline bool Object::empty() const { return entries_.empty(); }

// Names of types as messages use them: "undefined", "none", "boolean", "integer", "float",
// "string", "list", "dict", "namespace", "callable".
const char* type_name(Value::Type type);
inline const char* type_name(const Value& v) { return type_name(v.type()); }

// Python's str(v) as Jinja renders {{ v }}: undefined is "", None "None", True "True",
// 1.0 "1.0", lists and dicts in Python's repr ("['a', 1]"). Throws for values nested
// deeper than kMaxValueDepth (a namespace that holds itself).
std::string to_text(const Value& v);
// Python's repr(v): strings quoted ('it''s' -> "it's"), the rest as to_text.
std::string to_repr(const Value& v);
// Python's ==: numbers by value (True == 1 == 1.0), lists and dicts by contents, a
// namespace or callable only to itself, undefined to undefined.
bool values_equal(const Value& a, const Value& b);

constexpr int kMaxValueDepth = 256;

}  // namespace gatedlm::chat
