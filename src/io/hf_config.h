#pragma once
// Hugging Face config.json <-> gatedlm's model config, by model family (io/model_family.h:
// paper, qwen3, qwen3_moe, qwen3_next, qwen3_5, qwen3_5_moe, each in io/family_<name>.cpp).
// An HfFormat names one registered family; these functions are the entry points the
// commands and Python call, and dispatch to the family. Keys gatedlm cannot represent are
// refused by name; keys without effect on the computation (token ids, dtype, version,
// dropout, ...) are listed and ignored (io/hf_reader.h).
#include <nlohmann/json.hpp>
#include <string>

#include "model/config.h"

namespace gatedlm::io {

struct ModelFamily;

// A registered model family, by handle: compared by identity, never empty.
class HfFormat {
 public:
  constexpr HfFormat(const ModelFamily& family) : family_(&family) {}  // NOLINT: a family is a format
  const ModelFamily& family() const { return *family_; }
  const ModelFamily* operator->() const { return family_; }
  friend bool operator==(HfFormat a, HfFormat b) { return a.family_ == b.family_; }
  friend bool operator!=(HfFormat a, HfFormat b) { return a.family_ != b.family_; }
  // The six families by name, for callers written before the registry; a family added
  // later needs no constant here (find it by name: parse_hf_format).
  static const HfFormat paper, qwen3, qwen3_moe, qwen3_next, qwen3_5, qwen3_5_moe;

 private:
  const ModelFamily* family_;
};

bool is_hybrid_format(HfFormat f);  // qwen3_next, qwen3_5, qwen3_5_moe: Gated DeltaNet hybrids
std::string to_string(HfFormat f);  // the family's name
// A registered family's name; "auto" is resolved from the config itself (detect_hf_format).
HfFormat parse_hf_format(const std::string& name);
// The registered families' names joined by `separator` ("paper | qwen3 | ..."), for help texts.
std::string hf_format_names(const std::string& separator);
// The family whose claim on the config is strongest (io/model_family.h, Claim): a hybrid's
// model_type (also inside a multimodal config's text_config), else paper when any of the
// paper's keys is present, else qwen3_moe by model_type, else qwen3.
HfFormat detect_hf_format(const nlohmann::json& hf);

// Throws naming `source` and the key.
model::ModelConfig config_from_hf(const nlohmann::json& hf, HfFormat format, const std::string& source);
// Throws naming the gatedlm key that the format cannot express.
nlohmann::ordered_json config_to_hf(const model::ModelConfig& c, HfFormat format, const std::string& torch_dtype);

// Where the language model's tensors live: "model.language_model." in a multimodal
// checkpoint (a config with "text_config"), else "model.".
std::string hf_weight_prefix(const nlohmann::json& hf);

}  // namespace gatedlm::io
