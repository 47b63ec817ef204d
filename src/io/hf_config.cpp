#include "io/hf_config.h"

#include "core/error.h"
#include "io/model_family.h"

namespace gatedlm::io {

namespace {

const ModelFamily& registered(const char* name) {
  const ModelFamily* f = find_family(name);
  if (!f) fail("internal error: model family ", name, " is not registered");
  return *f;
}

}  // namespace

// The registry is constant-initialised (addresses and plain data), so these lookups may run
// during static initialisation.
const HfFormat HfFormat::paper{registered("paper")};
const HfFormat HfFormat::qwen3{registered("qwen3")};
const HfFormat HfFormat::qwen3_moe{registered("qwen3_moe")};
const HfFormat HfFormat::qwen3_next{registered("qwen3_next")};
const HfFormat HfFormat::qwen3_5{registered("qwen3_5")};
const HfFormat HfFormat::qwen3_5_moe{registered("qwen3_5_moe")};

bool is_hybrid_format(HfFormat f) { return f->hybrid; }

std::string to_string(HfFormat f) { return f->name; }

HfFormat parse_hf_format(const std::string& name) {
  if (const ModelFamily* f = find_family(name)) return *f;
  fail("--format: unknown value \"", name, "\" (expected auto|", family_names("|"), "|gguf)");
}

std::string hf_format_names(const std::string& separator) { return family_names(separator); }

HfFormat detect_hf_format(const nlohmann::json& hf) { return detect_family(hf); }

model::ModelConfig config_from_hf(const nlohmann::json& hf, HfFormat format, const std::string& source) {
  return format->config_from_hf(hf, source);
}

nlohmann::ordered_json config_to_hf(const model::ModelConfig& c, HfFormat format, const std::string& torch_dtype) {
  return format->config_to_hf(c, torch_dtype);
}

std::string hf_weight_prefix(const nlohmann::json& hf) {
  return hf.is_object() && hf.contains("text_config") ? "model.language_model." : "model.";
}

}  // namespace gatedlm::io
