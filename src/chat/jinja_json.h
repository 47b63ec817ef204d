#pragma once
// Values to and from JSON: the context a template renders with comes as JSON (messages,
// tools, keyword arguments), and the `tojson` filter writes JSON as transformers' does,
// which is Python's json.dumps(x, ensure_ascii=False, indent=None, separators=None,
// sort_keys=False): ", " and ": " between items and keys, "," and ": " with an indent,
// keys in the order they came, floats as Python writes them (1.0, 1e-05).
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/jinja_value.h"

namespace gatedlm::chat {

// JSON to a value: objects keep their keys' order (nlohmann::json's sorted order for the
// plain json type), integers that fit 64 bits stay integers. Throws EvalError past
// kMaxValueDepth levels.
Value value_from_json(const nlohmann::ordered_json& j);
Value value_from_json(const nlohmann::json& j);
// A value as JSON; undefined becomes null, a namespace an object; a callable is an error.
nlohmann::ordered_json value_to_json(const Value& v);

struct JsonStyle {
  std::optional<std::string> indent;  // none: all on one line
  std::optional<std::string> item_separator, key_separator;  // none: Python's defaults
  bool ensure_ascii = false;  // write characters beyond ASCII as \uXXXX (surrogate pairs beyond the BMP)
  bool sort_keys = false;
};

// json.dumps(v, ...) of Python; throws EvalError for undefined and callables (Python's
// "Object of type Undefined is not JSON serializable") and past `max_bytes`.
std::string dump_json(const Value& v, const JsonStyle& style, size_t max_bytes);

}  // namespace gatedlm::chat
