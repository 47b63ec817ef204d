#pragma once
// Typed, recording access to a Hugging Face config.json object: every key read (or marked
// ignored) is remembered, so reject_unknown() can refuse by name whatever gatedlm did not
// map. Used by every model family (io/model_family.h) and the keys they share
// (io/hf_shared_keys.h).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>

#include "core/error.h"
#include "model/config.h"

namespace gatedlm::io {

// Keys that do not change what the model computes from token ids.
inline const std::set<std::string> kHfIgnoredKeys = {
    "architectures", "auto_map", "bos_token_id", "eos_token_id", "pad_token_id", "torch_dtype", "dtype",
    "transformers_version", "use_cache", "attention_dropout", "max_window_layers", "_name_or_path",
    "tokenizer_class", "output_attentions", "output_hidden_states", "return_dict"};

class HfReader {
 public:
  HfReader(const nlohmann::json& j, std::string source) : j_(j), source_(std::move(source)) {
    if (!j.is_object()) fail(source_, ": expected a JSON object");
  }
  const std::string& source() const { return source_; }
  bool has(const std::string& k) const { return j_.contains(k) && !j_.at(k).is_null(); }
  const nlohmann::json& raw(const std::string& k) {
    used_.insert(k);
    return j_.at(k);
  }
  void ignore(const std::string& k) { used_.insert(k); }
  std::string where(const std::string& k) const { return source_ + ": key \"" + k + "\""; }
  int64_t integer(const std::string& k, std::optional<int64_t> fallback) {
    used_.insert(k);
    if (!has(k)) {
      if (!fallback) fail(source_, ": missing required key \"", k, "\"");
      return *fallback;
    }
    if (!j_.at(k).is_number_integer()) fail(where(k), ": expected an integer, got ", j_.at(k).dump());
    return j_.at(k).get<int64_t>();
  }
  double number(const std::string& k, double fallback) {
    used_.insert(k);
    if (!has(k)) return fallback;
    if (!j_.at(k).is_number()) fail(where(k), ": expected a number, got ", j_.at(k).dump());
    return j_.at(k).get<double>();
  }
  bool boolean(const std::string& k, bool fallback) {
    used_.insert(k);
    if (!has(k)) return fallback;
    if (!j_.at(k).is_boolean()) fail(where(k), ": expected true or false, got ", j_.at(k).dump());
    return j_.at(k).get<bool>();
  }
  std::string string(const std::string& k, const std::string& fallback) {
    used_.insert(k);
    if (!has(k)) return fallback;
    if (!j_.at(k).is_string()) fail(where(k), ": expected a string, got ", j_.at(k).dump());
    return j_.at(k).get<std::string>();
  }
  void reject_unknown() const {
    for (const auto& [k, v] : j_.items())
      if (!used_.count(k) && !kHfIgnoredKeys.count(k))
        fail(source_, ": key \"", k, "\" is not something gatedlm can represent (value ", v.dump(), ")");
  }

 private:
  const nlohmann::json& j_;
  std::string source_;
  std::set<std::string> used_;
};

// The end of every config mapping: refuses the keys nothing read, then the model's own
// checks (model::ModelConfig::validate), naming `source`.
inline void finish_config(const HfReader& r, const model::ModelConfig& c, const std::string& source) {
  r.reject_unknown();
  try {
    c.validate();
  } catch (const Error& e) {
    fail(source, ": the model it describes is not valid: ", e.what());
  }
}

}  // namespace gatedlm::io
