#include "chat/jinja_predicates.h"

#include <cmath>
#include <string>

#include "chat/jinja_error.h"
#include "chat/jinja_operators.h"

namespace gatedlm::chat {

namespace {

// Python's str.islower / str.isupper over ASCII letters: at least one cased letter, and
// none of the other case.
bool has_case(const Value& v, bool lower) {
  if (!v.is_string()) return false;
  bool cased = false;
  for (char c : v.as_string()) {
    const bool is_lower = c >= 'a' && c <= 'z', is_upper = c >= 'A' && c <= 'Z';
    if ((lower && is_upper) || (!lower && is_lower)) return false;
    cased = cased || is_lower || is_upper;
  }
  return cased;
}

// value % divisor == 0, for integers and floats alike.
bool divisible(const Value& v, const Value& divisor, const char* test) {
  if (!v.is_number()) fail_type(v, cat("the test '", test, "'"), "a number");
  if (!divisor.is_number()) fail_type(divisor, cat("the test '", test, "'"), "a number as its argument");
  if (v.is_float() || divisor.is_float()) {
    if (divisor.as_double() == 0) throw EvalError("float modulo by zero");
    return std::fmod(v.as_double(), divisor.as_double()) == 0;
  }
  const int64_t d = divisor.is_int() ? divisor.as_int() : divisor.as_bool();
  if (d == 0) throw EvalError("integer modulo by zero");
  const int64_t x = v.is_int() ? v.as_int() : v.as_bool();
  return d == -1 || x % d == 0;
}

using Unary = bool (*)(const Value&);
struct UnaryTest {
  std::string_view name;
  Unary test;
};
constexpr UnaryTest kUnaryTests[] = {
    {"defined", [](const Value& v) { return !v.is_undefined(); }},
    {"undefined", [](const Value& v) { return v.is_undefined(); }},
    {"none", [](const Value& v) { return v.is_none(); }},
    {"boolean", [](const Value& v) { return v.is_bool(); }},
    {"true", [](const Value& v) { return v.is_bool() && v.as_bool(); }},
    {"false", [](const Value& v) { return v.is_bool() && !v.as_bool(); }},
    {"integer", [](const Value& v) { return v.is_int(); }},
    {"float", [](const Value& v) { return v.is_float(); }},
    {"number", [](const Value& v) { return v.is_number(); }},
    {"string", [](const Value& v) { return v.is_string(); }},
    {"mapping", [](const Value& v) { return v.is_object(); }},
    {"iterable", [](const Value& v) { return v.is_array() || v.is_string() || v.is_object() || v.is_undefined(); }},
    {"sequence", [](const Value& v) { return v.is_array() || v.is_string() || v.is_object() || v.is_undefined(); }},
    {"callable", [](const Value& v) { return v.is_callable(); }},
    {"lower", [](const Value& v) { return has_case(v, true); }},
    {"upper", [](const Value& v) { return has_case(v, false); }},
    {"even", [](const Value& v) { return divisible(v, Value::integer(2), "even"); }},
    {"odd", [](const Value& v) { return !divisible(v, Value::integer(2), "odd"); }},
};

struct BinaryTest {
  std::string_view name;
  CompareOp op;
};
constexpr BinaryTest kComparisonTests[] = {
    {"eq", CompareOp::eq}, {"equalto", CompareOp::eq}, {"==", CompareOp::eq},   {"ne", CompareOp::ne},
    {"!=", CompareOp::ne}, {"lt", CompareOp::lt},      {"lessthan", CompareOp::lt}, {"<", CompareOp::lt},
    {"le", CompareOp::le}, {"<=", CompareOp::le},      {"gt", CompareOp::gt},   {"greaterthan", CompareOp::gt},
    {">", CompareOp::gt},  {"ge", CompareOp::ge},      {">=", CompareOp::ge},   {"in", CompareOp::in},
};

}  // namespace

bool apply_test(std::string_view name, const Value& v, const CallArgs& args) {
  for (const UnaryTest& t : kUnaryTests) {
    if (t.name != name) continue;
    expect_no_args(args, cat("the test '", name, "'"));
    return t.test(v);
  }
  for (const BinaryTest& t : kComparisonTests) {
    if (t.name != name) continue;
    const BoundArgs bound(args, cat("the test '", name, "'"), {"other"});
    if (!bound.given(0)) throw EvalError(cat("the test '", name, "' needs a value to compare with"));
    return compare(t.op, v, bound[0]);
  }
  if (name == "divisibleby") {
    const BoundArgs bound(args, "the test 'divisibleby'", {"num"});
    return divisible(v, bound[0], "divisibleby");
  }
  throw EvalError(cat("unknown test '", name, "'"));
}

}  // namespace gatedlm::chat
