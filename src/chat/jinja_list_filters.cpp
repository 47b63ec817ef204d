#include "chat/jinja_list_filters.h"

#include <algorithm>
#include <unordered_set>
#include <vector>

#include "chat/jinja_error.h"
#include "chat/jinja_operators.h"
#include "chat/jinja_predicates.h"
#include "chat/jinja_text.h"

namespace gatedlm::chat {

Value attribute_path(const Value& item, const std::string& path) {
  Value v = item;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool digits = !part.empty() && part.size() < 18 &&
                        std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    v = digits ? get_item(v, Value::integer(std::stoll(part))) : get_item(v, Value::string(part));
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

namespace {

Value length_filter(Interpreter&, const Value& v, const CallArgs& args) {
  expect_no_args(args, "filter 'length'");
  switch (v.type()) {
    case Value::Type::string: return Value::integer(static_cast<int64_t>(count_characters(v.as_string())));
    case Value::Type::array: return Value::integer(static_cast<int64_t>(v.as_array().size()));
    case Value::Type::object: return Value::integer(static_cast<int64_t>(v.as_object().size()));
    case Value::Type::undefined: return Value::integer(0);
    default: fail_type(v, "filter 'length'", "a string, list or dict");
  }
}

Value first_or_last(const Value& v, const CallArgs& args, bool first) {
  expect_no_args(args, first ? "filter 'first'" : "filter 'last'");
  const std::vector<Value> items = iteration_items(v);
  if (items.empty()) return Value::undefined(first ? "no first item: the sequence is empty" : "no last item: the sequence is empty");
  return first ? items.front() : items.back();
}

Value list_filter(Interpreter&, const Value& v, const CallArgs& args) {
  expect_no_args(args, "filter 'list'");
  return Value::array(iteration_items(v));
}

Value items_filter(Interpreter&, const Value& v, const CallArgs& args) {
  expect_no_args(args, "filter 'items'");
  if (v.is_undefined()) return Value::array({});
  if (!v.is_object()) fail_type(v, "filter 'items'", "a dict");
  Array pairs;
  for (const auto& [key, value] : v.as_object().entries()) pairs.push_back(Value::tuple({Value::string(key), value}));
  return Value::array(std::move(pairs));
}

Value reverse_filter(Interpreter&, const Value& v, const CallArgs& args) {
  expect_no_args(args, "filter 'reverse'");
  if (v.is_string()) return slice(v, std::nullopt, std::nullopt, -1);
  std::vector<Value> items = iteration_items(v);
  std::reverse(items.begin(), items.end());
  return Value::array(std::move(items));
}

// The sort key of Jinja's sort, unique and dictsort: strings lower-cased unless case matters.
Value sort_key(const Value& v, bool case_sensitive) {
  return v.is_string() && !case_sensitive ? Value::string(ascii_lower(v.as_string())) : v;
}

bool less(const Value& a, const Value& b) { return compare(CompareOp::lt, a, b); }

Value sort_filter(Interpreter&, const Value& v, const CallArgs& args) {
  const BoundArgs bound(args, "filter 'sort'", {"reverse", "case_sensitive", "attribute"});
  const bool reverse = bound.flag(0, false), case_sensitive = bound.flag(1, false);
  const std::string attribute = bound.text(2, "");
  std::vector<std::pair<Value, Value>> keyed;  // (key, item)
  for (Value& item : iteration_items(v))
    keyed.emplace_back(sort_key(attribute.empty() ? item : attribute_path(item, attribute), case_sensitive), item);
  // Stable, as Python's sorted: equal keys keep their order, reversed or not.
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? less(y.first, x.first) : less(x.first, y.first);
  });
  Array out;
  for (auto& kv : keyed) out.push_back(std::move(kv.second));
  return Value::array(std::move(out));
}

// A key for Python's set of hashable values: 1, 1.0 and True are one key, as in Python.
std::string hash_key(const Value& v) {
  std::string key;
  if (v.is_number()) {
    const double d = v.as_double();
    const bool integral = !v.is_float() || d == static_cast<double>(static_cast<int64_t>(d));
    key = integral ? "n" : "f";
    key += integral ? std::to_string(v.is_float() ? static_cast<int64_t>(d) : v.is_int() ? v.as_int() : v.as_bool())
                    : python_float(d);
    return key;
  }
  if (v.is_string()) return key.append("s").append(v.as_string());
  if (v.is_none()) return "none";
  throw EvalError(cat("unhashable type: ", type_name(v)));
}

Value unique_filter(Interpreter&, const Value& v, const CallArgs& args) {
  const BoundArgs bound(args, "filter 'unique'", {"case_sensitive", "attribute"});
  const bool case_sensitive = bound.flag(0, false);
  const std::string attribute = bound.text(1, "");
  std::unordered_set<std::string> seen;
  Array out;
  for (Value& item : iteration_items(v)) {
    const Value key = sort_key(attribute.empty() ? item : attribute_path(item, attribute), case_sensitive);
    if (seen.insert(hash_key(key)).second) out.push_back(std::move(item));
  }
  return Value::array(std::move(out));
}

Value dictsort_filter(Interpreter&, const Value& v, const CallArgs& args) {
  const BoundArgs bound(args, "filter 'dictsort'", {"case_sensitive", "by", "reverse"});
  if (!v.is_object()) fail_type(v, "filter 'dictsort'", "a dict");
  const bool case_sensitive = bound.flag(0, false), reverse = bound.flag(2, false);
  const std::string by = bound.text(1, "key");
  if (by != "key" && by != "value") throw EvalError("filter 'dictsort': 'by' must be 'key' or 'value'");
  std::vector<std::pair<Value, Value>> keyed;
  for (const auto& [key, value] : v.as_object().entries())
    keyed.emplace_back(sort_key(by == "key" ? Value::string(key) : value, case_sensitive),
                       Value::tuple({Value::string(key), value}));
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? less(y.first, x.first) : less(x.first, y.first);
  });
  Array out;
  for (auto& kv : keyed) out.push_back(std::move(kv.second));
  return Value::array(std::move(out));
}

Value join_filter(Interpreter& in, const Value& v, const CallArgs& args) {
  const BoundArgs bound(args, "filter 'join'", {"d", "attribute"});
  const std::string separator = bound.text(0, "");
  const std::string attribute = bound.text(1, "");
  std::string out;
  bool first = true;
  for (const Value& item : iteration_items(v)) {
    const std::string text = to_text(attribute.empty() ? item : attribute_path(item, attribute));
    in.check_text_size(out.size() + separator.size() + text.size());
    if (!first) out += separator;
    first = false;
    out += text;
  }
  return Value::string(std::move(out));
}

// map(attribute='x', default=d), or map('filter', args...) applying a filter to each item.
Value map_filter(Interpreter& in, const Value& v, const CallArgs& args) {
  const auto attribute = std::find_if(args.keyword.begin(), args.keyword.end(), [](const auto& k) { return k.first == "attribute"; });
  Array out;
  if (attribute != args.keyword.end()) {
    const BoundArgs bound(args, "filter 'map'", {"attribute", "default"});
    const std::string path = bound.text(0, "");
    for (const Value& item : iteration_items(v)) {
      Value mapped = attribute_path(item, path);
      out.push_back(mapped.is_undefined() && bound.given(1) ? bound[1] : std::move(mapped));
    }
    return Value::array(std::move(out));
  }
  if (args.positional.empty() || !args.positional[0].is_string())
    throw EvalError("filter 'map' needs attribute= or the name of a filter");
  CallArgs rest{{args.positional.begin() + 1, args.positional.end()}, args.keyword};
  for (const Value& item : iteration_items(v)) out.push_back(in.filter(args.positional[0].as_string(), item, rest));
  return Value::array(std::move(out));
}

// select / reject / selectattr / rejectattr: keep the items (or whose attribute) passing the
// named test, or true when no test is named.
Value select_items(const Value& v, const CallArgs& args, bool keep, bool by_attribute, const char* what) {
  size_t next = 0;
  std::string attribute;
  if (by_attribute) {
    if (args.positional.empty() || !args.positional[0].is_string()) throw EvalError(cat(what, " needs an attribute name"));
    attribute = args.positional[next++].as_string();
  }
  std::string test;
  if (next < args.positional.size()) {
    if (!args.positional[next].is_string()) throw EvalError(cat(what, " needs the name of a test"));
    test = args.positional[next++].as_string();
  }
  const CallArgs test_args{{args.positional.begin() + static_cast<std::ptrdiff_t>(next), args.positional.end()}, args.keyword};
  Array out;
  for (const Value& item : iteration_items(v)) {
    const Value subject = by_attribute ? attribute_path(item, attribute) : item;
    const bool passes = test.empty() ? subject.truthy() : apply_test(test, subject, test_args);
    if (passes == keep) out.push_back(item);
  }
  return Value::array(std::move(out));
}

constexpr FilterEntry kListFilters[] = {
    {"length", length_filter},
    {"count", length_filter},
    {"first", [](Interpreter&, const Value& v, const CallArgs& a) { return first_or_last(v, a, true); }},
    {"last", [](Interpreter&, const Value& v, const CallArgs& a) { return first_or_last(v, a, false); }},
    {"list", list_filter},
    {"items", items_filter},
    {"reverse", reverse_filter},
    {"sort", sort_filter},
    {"unique", unique_filter},
    {"dictsort", dictsort_filter},
    {"join", join_filter},
    {"map", map_filter},
    {"select", [](Interpreter&, const Value& v, const CallArgs& a) { return select_items(v, a, true, false, "filter 'select'"); }},
    {"reject", [](Interpreter&, const Value& v, const CallArgs& a) { return select_items(v, a, false, false, "filter 'reject'"); }},
    {"selectattr", [](Interpreter&, const Value& v, const CallArgs& a) { return select_items(v, a, true, true, "filter 'selectattr'"); }},
    {"rejectattr", [](Interpreter&, const Value& v, const CallArgs& a) { return select_items(v, a, false, true, "filter 'rejectattr'"); }},
};

}  // namespace

std::span<const FilterEntry> list_filters() { return kListFilters; }

}  // namespace gatedlm::chat
