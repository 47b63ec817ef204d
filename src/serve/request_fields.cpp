#include "serve/request_fields.h"

#include <cmath>
#include <vector>

#include "core/error.h"

namespace gatedlm::serve {

using nlohmann::json;

namespace {

// Deeper than any request needs; a body of a million '[' would otherwise reach code that
// recurses once per level (json::dump for the error message) and overflow the stack.
constexpr int kMaxDepth = 32;

// stop: a string or up to 4 of them, none empty.
std::vector<std::string> stop_strings(const json& s) {
  std::vector<json> items = s.is_array() ? std::vector<json>(s.begin(), s.end()) : std::vector<json>{s};
  if (items.size() > 4) throw InvalidRequest("stop", "'stop' holds at most 4 strings");
  std::vector<std::string> stop;
  for (const json& x : items) {
    if (!x.is_string() || x.get<std::string>().empty())
      throw InvalidRequest("stop", "'stop' must be a non-empty string or a list of them");
    stop.push_back(x.get<std::string>());
  }
  return stop;
}

}  // namespace

// A key given twice in one object ({"prompt": "a", "prompt": "b"}) is refused, naming the
// key, as core/json_file.h refuses it in files: nlohmann::json alone keeps the last one.
json parse_object(const std::string& body, const std::set<std::string>& known) {
  std::vector<std::set<std::string>> open_objects;  // the keys seen, one set per open object
  auto check = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth > kMaxDepth)
      throw InvalidRequest("", "the body nests arrays or objects deeper than " + std::to_string(kMaxDepth) + " levels");
    if (event == json::parse_event_t::object_start) open_objects.emplace_back();
    if (event == json::parse_event_t::object_end && !open_objects.empty()) open_objects.pop_back();
    if (event == json::parse_event_t::key && !open_objects.empty()) {
      const std::string key = parsed.get<std::string>();
      if (!open_objects.back().insert(key).second)
        throw InvalidRequest(key, "the key '" + key + "' appears twice in one object");
    }
    return true;
  };
  json j;
  try {
    j = json::parse(body, check);
  } catch (const json::exception& e) {
    // parse_error, and out_of_range 406 for a number that fits no double (1e400): found by
    // fuzzing (tests/fuzz/corpus/serve_request/number_overflow_8888e8888), it was a 500.
    throw InvalidRequest("", std::string("malformed JSON: ") + e.what());
  }
  if (!j.is_object()) throw InvalidRequest("", "the body must be a JSON object");
  for (const auto& [key, value] : j.items())
    if (!known.count(key)) throw InvalidRequest(key, "unknown field '" + key + "'");
  return j;
}

// A number field within [lo, hi] (open ends where told), or the default when absent.
double number(const json& j, const std::string& key, double fallback, double lo, double hi, bool lo_open) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_number()) throw InvalidRequest(key, "'" + key + "' must be a number");
  const double v = j[key].get<double>();
  if (!std::isfinite(v) || (lo_open ? v <= lo : v < lo) || v > hi)
    throw InvalidRequest(key, "'" + key + "' must be in " + (lo_open ? "(" : "[") + std::to_string(lo) + ", " +
                                  std::to_string(hi) + "], got " + j[key].dump());
  return v;
}

int64_t integer(const json& j, const std::string& key, int64_t fallback, int64_t lo, int64_t hi) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_number_integer()) throw InvalidRequest(key, "'" + key + "' must be an integer");
  if (j[key].is_number_unsigned() && j[key].get<uint64_t>() > static_cast<uint64_t>(hi))
    throw InvalidRequest(key, "'" + key + "' must be at most " + std::to_string(hi) + ", got " + j[key].dump());
  const int64_t v = j[key].get<int64_t>();
  if (v < lo || v > hi)
    throw InvalidRequest(key, "'" + key + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                                  "], got " + j[key].dump());
  return v;
}

std::vector<int32_t> token_list(const json& v, const std::string& key, int64_t vocab) {
  if (!v.is_array()) throw InvalidRequest(key, "'" + key + "' must be a list of token ids");
  std::vector<int32_t> ids;
  for (const json& t : v) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= vocab)
      throw InvalidRequest(key, "'" + key + "' holds " + t.dump() + ", not a token id in [0, " +
                                    std::to_string(vocab - 1) + "]");
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return ids;
}

// The tokenizer's refusal (text it cannot encode, an id it cannot decode) as a 400 about
// `param`, without the server's tokenizer path that the message starts with.
InvalidRequest tokenizer_refusal(const Error& e, const io::Tokenizer& tokenizer, const std::string& param) {
  std::string message = e.what();
  const std::string prefix = tokenizer.name() + ": ";
  if (message.starts_with(prefix)) message.erase(0, prefix.size());
  return InvalidRequest(param, "'" + param + "': " + message);
}

std::vector<int32_t> encode(const io::Tokenizer& tokenizer, const std::string& text, const std::string& param) {
  try {
    return tokenizer.encode(text);
  } catch (const Error& e) {
    throw tokenizer_refusal(e, tokenizer, param);
  }
}

void parse_generation_fields(const json& j, const io::Tokenizer& tokenizer, const GenerationLimits& limits,
                             CompletionRequest& r) {
  if (j.contains("model") && !j["model"].is_string()) throw InvalidRequest("model", "'model' must be a string");
  if (j.contains("user") && !j["user"].is_string()) throw InvalidRequest("user", "'user' must be a string");
  integer(j, "n", 1, 1, 1);
  const int64_t room = limits.context - static_cast<int64_t>(r.prompt.size());
  if (room < 1)
    throw InvalidRequest(limits.prompt_field, "the prompt's " + std::to_string(r.prompt.size()) +
                                       " tokens leave no room in the context of " + std::to_string(limits.context));
  const int64_t fallback = std::min(limits.default_max_tokens, room);
  const bool completion_key = j.contains("max_completion_tokens") && !j["max_completion_tokens"].is_null();
  r.rules.max_tokens = integer(j, completion_key ? "max_completion_tokens" : "max_tokens", fallback, 1, room);
  if (j.contains("ignore_eos") && !j["ignore_eos"].is_boolean())
    throw InvalidRequest("ignore_eos", "'ignore_eos' must be true or false");
  r.rules.eos = j.value("ignore_eos", false) ? -1 : tokenizer.eos_id();
  r.sampling.temperature = number(j, "temperature", 1.0, 0.0, 100.0);
  r.sampling.top_p = number(j, "top_p", 1.0, 0.0, 1.0, /*lo_open=*/true);
  r.sampling.top_k = integer(j, "top_k", 0, 0, limits.vocab);
  r.sampling.min_p = number(j, "min_p", 0.0, 0.0, 1.0);
  r.sampling.repetition_penalty = number(j, "repetition_penalty", 1.0, 0.0, 100.0, /*lo_open=*/true);
  r.sampling.seed =
      static_cast<uint64_t>(integer(j, "seed", static_cast<int64_t>(limits.default_seed >> 1), 0, INT64_MAX));
  if (j.contains("stop") && !j["stop"].is_null()) r.rules.stop = stop_strings(j["stop"]);
  if (j.contains("stream") && !j["stream"].is_boolean()) throw InvalidRequest("stream", "'stream' must be true or false");
  r.stream = j.value("stream", false);
}

}  // namespace gatedlm::serve
