#include "chat/jinja_methods.h"

#include <string>

#include "chat/jinja_error.h"
#include "chat/jinja_operators.h"
#include "chat/jinja_text.h"

namespace gatedlm::chat {

Array split_text(const std::string& s, const Value& sep, int64_t maxsplit) {
  Array parts;
  if (sep.is_none() || sep.is_undefined()) {
    size_t i = leading_space_bytes(s);
    while (i < s.size()) {
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        parts.push_back(Value::string(s.substr(i)));  // the rest, its trailing space kept
        break;
      }
      size_t end = i;
      while (end < s.size()) {
        size_t next = end;
        if (is_space(next_code_point(s, next))) break;
        end = next;
      }
      parts.push_back(Value::string(s.substr(i, end - i)));
      i = end + leading_space_bytes(std::string_view(s).substr(end));
    }
    return parts;
  }
  if (!sep.is_string()) fail_type(sep, "str.split", "a string or none as the separator");
  const std::string& by = sep.as_string();
  if (by.empty()) throw EvalError("str.split: empty separator");
  size_t start = 0;
  for (size_t at = s.find(by); at != std::string::npos; at = s.find(by, start)) {
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) break;
    parts.push_back(Value::string(s.substr(start, at - start)));
    start = at + by.size();
  }
  parts.push_back(Value::string(s.substr(start)));
  return parts;
}

std::string replace_text(Interpreter& in, const std::string& s, const std::string& from, const std::string& to,
                         int64_t count) {
  std::string out;
  int64_t done = 0;
  const auto grow = [&](std::string_view piece) {
    in.check_text_size(out.size() + piece.size());
    out.append(piece);
  };
  if (from.empty()) {  // 'ab'.replace('', '-') is '-a-b-'
    for (std::string_view c : characters(s)) {
      if (count < 0 || done++ < count) grow(to);
      grow(c);
    }
    if (count < 0 || done < count) grow(to);
    return out;
  }
  size_t start = 0;
  for (size_t at = s.find(from); at != std::string::npos && (count < 0 || done < count); at = s.find(from, start)) {
    grow(std::string_view(s).substr(start, at - start));
    grow(to);
    start = at + from.size();
    ++done;
  }
  grow(std::string_view(s).substr(start));
  return out;
}

std::string title_words(std::string_view s) {
  std::string out(s);
  bool after_letter = false;
  for (char& c : out) {
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (letter) c = static_cast<char>(after_letter ? (c | 0x20) : (c & ~0x20));  // ASCII case is bit 5
    after_letter = letter;
  }
  return out;
}

std::string capitalize_text(std::string_view s) {
  std::string out = ascii_lower(s);
  if (!out.empty()) out[0] = ascii_upper(out.substr(0, 1))[0];
  return out;
}

namespace {

bool affix_matches(const std::string& s, const Value& affix, bool prefix, const char* method) {
  const auto one = [&](const Value& a) {
    if (!a.is_string()) fail_type(a, method, "a string or a list of strings");
    const std::string& x = a.as_string();
    return x.size() <= s.size() && (prefix ? s.compare(0, x.size(), x) : s.compare(s.size() - x.size(), x.size(), x)) == 0;
  };
  if (!affix.is_array()) return one(affix);
  for (const Value& a : affix.as_array())
    if (one(a)) return true;
  return false;
}

Value strip_method(const std::string& s, std::string_view name, const CallArgs& args) {
  const BoundArgs bound(args, cat("str.", name), {"chars"});
  const Value& chars = bound[0];
  if (!chars.is_undefined() && !chars.is_none() && !chars.is_string())
    fail_type(chars, cat("str.", name), "a string or none");
  const StripSide side = name == "strip" ? StripSide::both : name == "lstrip" ? StripSide::left : StripSide::right;
  const bool space = !chars.is_string();
  return Value::string(strip_text(s, side, space, space ? "" : chars.as_string()));
}

// str.find / str.count of a substring, in characters as Python counts.
Value search_method(const std::string& s, std::string_view name, const CallArgs& args) {
  const BoundArgs bound(args, cat("str.", name), {"sub"});
  if (!bound[0].is_string()) fail_type(bound[0], cat("str.", name), "a string");
  const std::string& sub = bound[0].as_string();
  if (name == "find") {
    const size_t at = s.find(sub);
    return Value::integer(at == std::string::npos ? -1 : static_cast<int64_t>(count_characters(s.substr(0, at))));
  }
  if (sub.empty()) return Value::integer(static_cast<int64_t>(count_characters(s)) + 1);
  int64_t n = 0;
  for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
  return Value::integer(n);
}

Value join_method(Interpreter& in, const std::string& separator, const CallArgs& args) {
  const BoundArgs bound(args, "str.join", {"iterable"});
  std::string out;
  bool first = true;
  for (const Value& item : iteration_items(bound[0])) {
    if (!item.is_string()) fail_type(item, "str.join", "strings to join");
    in.check_text_size(out.size() + separator.size() + item.as_string().size());
    if (!first) out += separator;
    first = false;
    out += item.as_string();
  }
  return Value::string(std::move(out));
}

bool string_method(Interpreter& in, const std::string& s, std::string_view name, const CallArgs& args, Value& result) {
  const std::string what = cat("str.", name);
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    expect_no_args(args, what);
    result = Value::string(name == "upper"   ? ascii_upper(s)
                           : name == "lower" ? ascii_lower(s)
                           : name == "title" ? title_words(s)
                                             : capitalize_text(s));
  } else if (name == "strip" || name == "lstrip" || name == "rstrip") {
    result = strip_method(s, name, args);
  } else if (name == "startswith" || name == "endswith") {
    const BoundArgs bound(args, what, {"prefix"});
    result = Value::boolean(affix_matches(s, bound[0], name == "startswith", what.c_str()));
  } else if (name == "split") {
    const BoundArgs bound(args, what, {"sep", "maxsplit"});
    result = Value::array(split_text(s, bound[0], bound.integer(1, -1)));
  } else if (name == "replace") {
    const BoundArgs bound(args, what, {"old", "new", "count"});
    if (!bound[0].is_string() || !bound[1].is_string()) throw EvalError("str.replace needs two strings");
    result = Value::string(replace_text(in, s, bound[0].as_string(), bound[1].as_string(), bound.integer(2, -1)));
  } else if (name == "find" || name == "count") {
    result = search_method(s, name, args);
  } else if (name == "join") {
    result = join_method(in, s, args);
  } else {
    return false;
  }
  return true;
}

bool dict_method(const Object& d, std::string_view name, const CallArgs& args, Value& result) {
  if (name == "get") {
    const BoundArgs bound(args, "dict.get", {"key", "default"});
    const Value* found = bound[0].is_string() ? d.find(bound[0].as_string()) : nullptr;
    result = found != nullptr ? *found : bound.get_or(1, Value::none());
    return true;
  }
  if (name != "items" && name != "keys" && name != "values") return false;
  expect_no_args(args, cat("dict.", name));
  Array out;
  for (const auto& [key, value] : d.entries()) {
    if (name == "items")
      out.push_back(Value::tuple({Value::string(key), value}));
    else
      out.push_back(name == "keys" ? Value::string(key) : value);
  }
  result = Value::array(std::move(out));
  return true;
}

}  // namespace

bool call_method(Interpreter& in, const Value& object, std::string_view name, const CallArgs& args, Value& result) {
  if (object.is_string()) return string_method(in, object.as_string(), name, args, result);
  if (object.is_object()) return dict_method(object.as_object(), name, args, result);
  return false;
}

}  // namespace gatedlm::chat
