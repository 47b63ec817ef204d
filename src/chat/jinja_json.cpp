#include "chat/jinja_json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "chat/jinja_error.h"
#include "chat/jinja_text.h"

namespace gatedlm::chat {

namespace {

template <typename Json>
Value from_json_at(const Json& j, int depth) {
  if (depth > kMaxValueDepth) throw EvalError(cat("the context nests deeper than ", kMaxValueDepth, " levels"));
  switch (j.type()) {
    case nlohmann::json::value_t::null:
    case nlohmann::json::value_t::discarded: return Value::none();
    case nlohmann::json::value_t::boolean: return Value::boolean(j.template get<bool>());
    case nlohmann::json::value_t::number_integer: return Value::integer(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      const auto u = j.template get<uint64_t>();
      if (u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return Value::integer(static_cast<int64_t>(u));
      return Value::floating(static_cast<double>(u));
    }
    case nlohmann::json::value_t::number_float: return Value::floating(j.template get<double>());
    case nlohmann::json::value_t::string: return Value::string(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      Array items;
      items.reserve(j.size());
      for (const auto& item : j) items.push_back(from_json_at(item, depth + 1));
      return Value::array(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      Object fields;
      for (auto it = j.begin(); it != j.end(); ++it) fields.set(it.key(), from_json_at(it.value(), depth + 1));
      return Value::object(std::move(fields));
    }
    case nlohmann::json::value_t::binary: break;
  }
  throw EvalError("binary JSON values cannot be used in a chat template");
}

nlohmann::ordered_json to_json_at(const Value& v, int depth) {
  if (depth > kMaxValueDepth) throw EvalError(cat("a value nests deeper than ", kMaxValueDepth, " levels"));
  switch (v.type()) {
    case Value::Type::undefined:
    case Value::Type::none: return nullptr;
    case Value::Type::boolean: return v.as_bool();
    case Value::Type::integer: return v.as_int();
    case Value::Type::floating: return v.as_float();
    case Value::Type::string: return v.as_string();
    case Value::Type::array: {
      auto out = nlohmann::ordered_json::array();
      for (const Value& item : v.as_array()) out.push_back(to_json_at(item, depth + 1));
      return out;
    }
    case Value::Type::object:
    case Value::Type::name_space: {
      auto out = nlohmann::ordered_json::object();
      const Object& fields = v.is_object() ? v.as_object() : v.as_namespace().fields;
      for (const auto& [key, value] : fields.entries()) out[key] = to_json_at(value, depth + 1);
      return out;
    }
    case Value::Type::callable: break;
  }
  throw EvalError("a callable cannot be written as JSON");
}

}  // namespace

Value value_from_json(const nlohmann::ordered_json& j) { return from_json_at(j, 0); }
Value value_from_json(const nlohmann::json& j) { return from_json_at(j, 0); }
nlohmann::ordered_json value_to_json(const Value& v) { return to_json_at(v, 0); }

namespace {

void append_json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  char buf[16];
  for (size_t i = 0; i < s.size();) {
    const size_t start = i;
    const char32_t c = next_code_point(s, i);
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (c < 0x20 || (ensure_ascii && c >= 0x7F && c < 0x10000)) {
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else if (ensure_ascii && c >= 0x10000) {  // a surrogate pair, as Python writes it
      const char32_t v = c - 0x10000;
      std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                    static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
      out += buf;
    } else {
      out.append(s.substr(start, i - start));
    }
  }
  out += '"';
}

class JsonWriter {
 public:
  JsonWriter(const JsonStyle& style, size_t max_bytes) : style_(style), max_bytes_(max_bytes) {
    items_ = style.item_separator.value_or(style.indent ? "," : ", ");
    keys_ = style.key_separator.value_or(": ");
  }

  void write(const Value& v, int depth) {
    if (depth > kMaxValueDepth) throw EvalError(cat("a value nests deeper than ", kMaxValueDepth, " levels"));
    if (out_.size() > max_bytes_) throw EvalError(cat("tojson's output passes the limit of ", max_bytes_, " bytes"));
    switch (v.type()) {
      case Value::Type::none: out_ += "null"; break;
      case Value::Type::boolean: out_ += v.as_bool() ? "true" : "false"; break;
      case Value::Type::integer: out_ += std::to_string(v.as_int()); break;
      case Value::Type::floating: write_float(v.as_float()); break;
      case Value::Type::string: append_json_string(out_, v.as_string(), style_.ensure_ascii); break;
      case Value::Type::array: write_array(v.as_array(), depth); break;
      case Value::Type::object: write_object(v.as_object(), depth); break;
      default: throw EvalError(cat("tojson cannot write ", type_name(v), " (not JSON serializable)"));
    }
  }
  std::string take() { return std::move(out_); }

 private:
  void write_float(double d) {
    if (std::isnan(d)) out_ += "NaN";
    else if (std::isinf(d)) out_ += d < 0 ? "-Infinity" : "Infinity";
    else out_ += python_float(d);
  }
  // Before an item at nesting `level` (Python's newline_indent): nothing on one line.
  void newline(int level) {
    if (!style_.indent) return;
    out_ += '\n';
    for (int i = 0; i < level; ++i) out_ += *style_.indent;
  }
  void write_array(const Array& items, int depth) {
    if (items.empty()) return void(out_ += "[]");
    out_ += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out_ += items_;
      newline(depth + 1);
      write(items[i], depth + 1);
    }
    newline(depth);
    out_ += ']';
  }
  void write_object(const Object& fields, int depth) {
    if (fields.empty()) return void(out_ += "{}");
    std::vector<const std::pair<std::string, Value>*> entries;
    for (const auto& entry : fields.entries()) entries.push_back(&entry);
    if (style_.sort_keys)
      std::stable_sort(entries.begin(), entries.end(), [](const auto* a, const auto* b) { return a->first < b->first; });
    out_ += '{';
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i > 0) out_ += items_;
      newline(depth + 1);
      append_json_string(out_, entries[i]->first, style_.ensure_ascii);
      out_ += keys_;
      write(entries[i]->second, depth + 1);
    }
    newline(depth);
    out_ += '}';
  }

  const JsonStyle& style_;
  size_t max_bytes_;
  std::string items_, keys_;
  std::string out_;
};

}  // namespace

std::string dump_json(const Value& v, const JsonStyle& style, size_t max_bytes) {
  JsonWriter writer(style, max_bytes);
  writer.write(v, 0);
  std::string out = writer.take();
  if (out.size() > max_bytes) throw EvalError(cat("tojson's output passes the limit of ", max_bytes, " bytes"));
  return out;
}

}  // namespace gatedlm::chat
