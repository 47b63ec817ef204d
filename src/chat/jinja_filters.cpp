#include "chat/jinja_filters.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "chat/jinja_error.h"
#include "chat/jinja_json.h"
#include "chat/jinja_list_filters.h"
#include "chat/jinja_methods.h"
#include "chat/jinja_operators.h"
#include "chat/jinja_text.h"

namespace gatedlm::chat {

namespace {

Value text_filter(const Value& v, const CallArgs& args, std::string_view name) {
  expect_no_args(args, cat("filter '", name, "'"));
  const std::string text = to_text(v);
  if (name == "upper") return Value::string(ascii_upper(text));
  if (name == "lower") return Value::string(ascii_lower(text));
  if (name == "capitalize") return Value::string(capitalize_text(text));
  return Value::string(text);  // string
}

// Jinja's title filter (not str.title): words start after white space or one of - ( { [ <,
// and each is capitalised: "they're here" -> "They're Here", "x-ray" -> "X-Ray".
Value title_filter(Interpreter&, const Value& v, const CallArgs& args) {
  expect_no_args(args, "filter 'title'");
  std::string text = to_text(v);
  bool word_start = true;
  for (char& c : text) {
    const bool separator = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || is_space(static_cast<unsigned char>(c));
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (letter) c = static_cast<char>(word_start ? (c & ~0x20) : (c | 0x20));  // ASCII case is bit 5
    word_start = separator;
  }
  return Value::string(std::move(text));
}

Value trim_filter(Interpreter&, const Value& v, const CallArgs& args) {
  const BoundArgs bound(args, "filter 'trim'", {"chars"});
  const bool space = !bound[0].is_string();
  return Value::string(strip_text(to_text(v), StripSide::both, space, space ? "" : bound[0].as_string()));
}

Value replace_filter(Interpreter& in, const Value& v, const CallArgs& args) {
  const BoundArgs bound(args, "filter 'replace'", {"old", "new", "count"});
  if (!bound[0].is_string() || !bound[1].is_string()) throw EvalError("filter 'replace' needs two strings");
  const int64_t count = bound[2].is_none() ? -1 : bound.integer(2, -1);
  return Value::string(replace_text(in, to_text(v), bound[0].as_string(), bound[1].as_string(), count));
}

// Jinja's indent: lines after the first get `width` spaces (or the string given); `first`
// indents the first line too, `blank` the empty lines.
Value indent_filter(Interpreter& in, const Value& v, const CallArgs& args) {
  const BoundArgs bound(args, "filter 'indent'", {"width", "first", "blank"});
  const std::string pad = bound[0].is_string() ? bound[0].as_string() : std::string(static_cast<size_t>(std::max<int64_t>(0, bound.integer(0, 4))), ' ');
  const bool first = bound.flag(1, false), blank = bound.flag(2, false);
  const std::string text = to_text(v) + "\n";  // Jinja's own quirk: a final newline keeps its (empty) line
  std::vector<std::string> lines;
  for (size_t start = 0, nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1)
    lines.push_back(text.substr(start, nl - start));
  std::string out = lines.empty() ? "" : lines[0];
  for (size_t i = 1; i < lines.size(); ++i) {
    in.check_text_size(out.size() + pad.size() + lines[i].size() + 1);
    out += '\n';
    if (blank || !lines[i].empty()) out += pad;
    out += lines[i];
  }
  return Value::string(first ? pad + out : out);
}

// Python's int(text) / float(text): the whole text (white space around allowed) or nothing.
bool parse_whole(const std::string& text, bool integer, double& d, int64_t& i) {
  const std::string t = strip_text(text, StripSide::both, true, "");
  if (t.empty()) return false;
  char* end = nullptr;
  errno = 0;
  if (integer) i = std::strtoll(t.c_str(), &end, 10);
  else d = std::strtod(t.c_str(), &end);
  return errno == 0 && end == t.c_str() + t.size();
}

Value int_filter(Interpreter&, const Value& v, const CallArgs& args) {
  const BoundArgs bound(args, "filter 'int'", {"default", "base"});
  const Value fallback = bound.get_or(0, Value::integer(0));
  if (v.is_int()) return v;
  if (v.is_bool()) return Value::integer(v.as_bool());
  double d = 0;
  int64_t i = 0;
  if (v.is_string() && parse_whole(v.as_string(), true, d, i)) return Value::integer(i);
  if (v.is_float()) d = v.as_float();
  else if (!v.is_string() || !parse_whole(v.as_string(), false, d, i)) return fallback;
  if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return fallback;
  return Value::integer(static_cast<int64_t>(d));  // toward zero, as Python's int()
}

Value float_filter(Interpreter&, const Value& v, const CallArgs& args) {
  const BoundArgs bound(args, "filter 'float'", {"default"});
  if (v.is_number()) return Value::floating(v.as_double());
  double d = 0;
  int64_t i = 0;
  if (v.is_string() && parse_whole(v.as_string(), false, d, i)) return Value::floating(d);
  return bound.get_or(0, Value::floating(0.0));
}

Value abs_filter(Interpreter&, const Value& v, const CallArgs& args) {
  expect_no_args(args, "filter 'abs'");
  if (v.is_float()) return Value::floating(std::fabs(v.as_float()));
  if (!v.is_number()) fail_type(v, "filter 'abs'", "a number");
  const int64_t i = v.is_int() ? v.as_int() : v.as_bool();
  return i < 0 ? negate(Value::integer(i)) : Value::integer(i);
}

// round(value, precision=0, method='common'): Python's round (to even on exact ties of the
// binary value, which printf's correctly rounded %.*f does too), or ceil / floor.
Value round_filter(Interpreter&, const Value& v, const CallArgs& args) {
  const BoundArgs bound(args, "filter 'round'", {"precision", "method"});
  const int64_t precision = bound.integer(0, 0);
  const std::string method = bound.text(1, "common");
  if (!v.is_number()) fail_type(v, "filter 'round'", "a number");
  if (method != "common" && method != "ceil" && method != "floor")
    throw EvalError("filter 'round': method must be 'common', 'ceil' or 'floor'");
  if (method == "common" && !v.is_float()) return Value::integer(v.is_int() ? v.as_int() : v.as_bool());
  const double x = v.as_double();
  if (method != "common" || precision < 0 || precision > 300) {
    const double scale = std::pow(10.0, static_cast<double>(precision));
    const double scaled = method == "ceil" ? std::ceil(x * scale) : method == "floor" ? std::floor(x * scale) : std::nearbyint(x * scale);
    return Value::floating(scaled / scale);
  }
  char buf[512];
  std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(precision), x);
  return Value::floating(std::strtod(buf, nullptr));
}

Value default_filter(Interpreter&, const Value& v, const CallArgs& args) {
  const BoundArgs bound(args, "filter 'default'", {"default_value", "boolean"});
  const bool falsy_too = bound.flag(1, false);
  if (v.is_undefined() || (falsy_too && !v.truthy())) return bound.get_or(0, Value::string(""));
  return v;
}

// transformers' tojson: json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
Value tojson_filter(Interpreter& in, const Value& v, const CallArgs& args) {
  const BoundArgs bound(args, "filter 'tojson'", {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonStyle style;
  style.ensure_ascii = bound.flag(0, false);
  style.sort_keys = bound.flag(3, false);
  if (bound[1].is_string()) style.indent = bound[1].as_string();
  else if (!bound[1].is_none() && bound.given(1)) style.indent = std::string(static_cast<size_t>(std::max<int64_t>(0, bound.integer(1, 0))), ' ');
  if (bound.given(2) && !bound[2].is_none()) {
    const Value& seps = bound[2];
    if (!seps.is_array() || seps.as_array().size() != 2 || !seps.as_array()[0].is_string() || !seps.as_array()[1].is_string())
      throw EvalError("filter 'tojson': separators must be two strings");
    style.item_separator = seps.as_array()[0].as_string();
    style.key_separator = seps.as_array()[1].as_string();
  }
  return Value::string(dump_json(v, style, in.limits().max_output_bytes));
}

constexpr FilterEntry kFilters[] = {
    {"upper", [](Interpreter&, const Value& v, const CallArgs& a) { return text_filter(v, a, "upper"); }},
    {"lower", [](Interpreter&, const Value& v, const CallArgs& a) { return text_filter(v, a, "lower"); }},
    {"capitalize", [](Interpreter&, const Value& v, const CallArgs& a) { return text_filter(v, a, "capitalize"); }},
    {"string", [](Interpreter&, const Value& v, const CallArgs& a) { return text_filter(v, a, "string"); }},
    {"safe", [](Interpreter&, const Value& v, const CallArgs& a) { return expect_no_args(a, "filter 'safe'"), v; }},
    {"title", title_filter},
    {"trim", trim_filter},
    {"replace", replace_filter},
    {"indent", indent_filter},
    {"int", int_filter},
    {"float", float_filter},
    {"abs", abs_filter},
    {"round", round_filter},
    {"default", default_filter},
    {"d", default_filter},
    {"tojson", tojson_filter},
};

}  // namespace

Value apply_filter(Interpreter& in, std::string_view name, const Value& operand, const CallArgs& args) {
  for (const FilterEntry& f : kFilters)
    if (f.name == name) return f.apply(in, operand, args);
  for (const FilterEntry& f : list_filters())
    if (f.name == name) return f.apply(in, operand, args);
  throw EvalError(cat("unknown filter '", name, "'"));
}

}  // namespace gatedlm::chat
