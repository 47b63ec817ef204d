#pragma once
// The model-family table: one entry per family of checkpoints gatedlm reads and writes
// (paper, qwen3, qwen3_moe, qwen3_next, qwen3_5, qwen3_5_moe), each defined in its own file
// io/family_<name>.cpp and registered in the one list of io/model_families.cpp. Import and
// export (io/hf_convert.h), GGUF read and write (io/gguf_import.h, io/gguf.h), format
// detection and the --format / --gguf-arch help texts iterate that list; none of them names
// a family. A family holds everything it means:
//   - its name (the --format value) and how import recognises its config.json (claim);
//   - its config.json keys and how they map to the model config, both ways (the keys
//     families share are read and written by io/hf_shared_keys.h);
//   - where each parameter lives in its checkpoint (map_tensors, over io/hf_names.h);
//   - its llama.cpp GGUF architecture, if it has one: the name, and the traits that select
//     the GGUF keys, tensor names and value maps (io/gguf_tables.h).
// Adding a family is one new file, a line in the list, its tests and a docs row
// (docs/architecture.md, "Adding a model family").
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "io/gguf_tensor.h"
#include "io/hf_names.h"
#include "model/config.h"
#include "model/param_layout.h"

namespace gatedlm::io {

// A llama.cpp architecture (general.architecture and the prefix of its keys) and what sets it
// apart; io/gguf_tables.cpp and io/gguf_import*.cpp read these traits, never the name.
struct GgufArchitecture {
  const char* name;            // "qwen35moe"
  bool gated;                  // the G1 gate inside attn_q, post_attention_norm, the hybrid keys (ssm.*, layer kinds)
  bool moe;                    // MoE FFNs only (else dense only)
  bool shared_expert;          // a sigmoid-gated shared expert is required (a zero one is written when absent)
  bool rope_sections;          // M-RoPE's rope.dimension_sections (text: plain rotate-half RoPE)
  bool grouped_linear_inputs;  // Qwen3-Next's grouped value heads, ssm_ba fused (and the older ssm_in); else tiled
  bool chosen_by_auto;         // export's --gguf-arch auto picks it for a model of its gate and FFN
  const char* without_moe;     // llama.cpp's words when asked for a dense model (nullptr: none)
  // Its tensor names beyond those every architecture shares (io/gguf_tables.h); the fused
  // ones (attn_q with the gate, stacked experts, the linear layers') are built by the traits.
  const std::vector<GgufName>& (*tensor_names)();
};

// How strongly a family claims a config.json for --format auto: the strongest claim wins,
// the first registered on a tie. The evidence ranks: the default (qwen3 claims anything, so
// that an unknown model_type is refused by name), a model_type, keys of a layout, a hybrid's
// model_type (also inside a multimodal wrapper's text_config).
enum class Claim { none = 0, fallback = 1, model_type = 2, layout_keys = 3, hybrid_model_type = 4 };

struct ModelFamily {
  const char* name;  // the --format value, and what import reports
  Claim (*claim)(const nlohmann::json& hf);
  // Throws naming `source` and the key it cannot map.
  model::ModelConfig (*config_from_hf)(const nlohmann::json& hf, const std::string& source);
  // Throws naming the gatedlm key the family cannot express ("export --format <name>: ...").
  nlohmann::ordered_json (*config_to_hf)(const model::ModelConfig& c, const std::string& torch_dtype);
  // Every parameter's tensor, shape and row map in a checkpoint whose language-model names
  // start with `prefix` (for "model."); stacked_experts: the storage the file uses, nullopt
  // for the family's own.
  std::vector<TensorMapping> (*map_tensors)(const model::ModelConfig& c, const model::ParamLayout& layout,
                                            const std::string& prefix, std::optional<bool> stacked_experts);
  // A hybrid checkpoint: possibly a multimodal wrapper (tensors under
  // "model.language_model.", a vision tower and MTP layers that import skips), experts stored
  // either way (stacked_experts is the family's own storage).
  bool hybrid;
  bool stacked_experts;
  const GgufArchitecture* gguf;  // nullptr: no llama.cpp architecture
};

// The registered families, in the order of io/model_families.cpp (and then any registered
// by a test).
std::vector<const ModelFamily*> model_families();
// The family named `name`, or nullptr.
const ModelFamily* find_family(const std::string& name);
// The family whose GGUF architecture is `arch`, or nullptr.
const ModelFamily* find_gguf_family(const std::string& arch);
// The family --format auto picks for a config.json (see Claim).
const ModelFamily& detect_family(const nlohmann::json& hf);

// The GGUF architectures, those export picks by itself first (registry order), then those
// only asked for by name: "qwen3, qwen3moe, qwen35, qwen35moe, qwen3next".
std::vector<const GgufArchitecture*> gguf_architectures();
// "a, b, c and d" / "a, b, c or d": the names, for messages.
std::string join_names(const std::vector<std::string>& names, const std::string& last_separator);
// The family names joined by `separator`: "paper | qwen3 | ...", for --format's help.
std::string family_names(const std::string& separator);
// The GGUF architecture names joined by `separator`, for --gguf-arch's help.
std::string gguf_architecture_names(const std::string& separator);

// Registers one more family while it lives (a test's toy family: adding a family is local).
class ScopedFamilyRegistration {
 public:
  explicit ScopedFamilyRegistration(const ModelFamily& family);
  ~ScopedFamilyRegistration();
  ScopedFamilyRegistration(const ScopedFamilyRegistration&) = delete;
  ScopedFamilyRegistration& operator=(const ScopedFamilyRegistration&) = delete;

 private:
  const ModelFamily* family_;
};

}  // namespace gatedlm::io
