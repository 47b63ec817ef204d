#pragma once
// Import of Hugging Face model directories (the paper's released checkpoints, transformers'
// Qwen3, Qwen3-MoE, Qwen3-Next, Qwen3.5) into gatedlm checkpoints, and export back, through
// the model family's config mapping and tensor map (io/model_family.h).
#include <optional>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "io/hf_config.h"
#include "io/hf_names.h"
#include "io/hf_weights.h"
#include "model/param_layout.h"

namespace gatedlm::io {

struct ImportedModel {
  Checkpoint checkpoint;
  HfFormat format;
  std::string weights_source;  // model.safetensors or the index file
  std::vector<std::string> notes;  // one line each: tensors skipped (a vision tower, MTP layers)
};

// Reads SRC/config.json and its weights; format nullopt = auto (detect_hf_format). Checks
// every name, shape and dtype before reading a value, and refuses (naming the key or
// tensor) what gatedlm cannot represent: unknown config keys, missing or unexpected
// tensors, other dtypes, an lm_head.weight that differs from a tied embedding.
ImportedModel import_hf(const std::string& src_dir, std::optional<HfFormat> format);

// Writes `out_dir`/config.json and model.safetensors in `format`, weights in `dtype` (a model
// with tiled value heads, as a qwen35 GGUF imports, is written grouped, as Hugging Face reads it).
// Refuses a config the format cannot express (io/hf_config.h) before writing anything.
// ck is taken by value: a caller done with its checkpoint moves it in, and the reorder
// costs no second copy of the weights.
void export_hf(Checkpoint ck, HfFormat format, kernels::ElementType dtype, const std::string& out_dir);

// Where each parameter of `layout` lives in a checkpoint of `format`, with the Hugging Face
// tensors' shapes and row maps; `prefix` replaces "model." in the language model's names
// ("model.language_model." in a multimodal Qwen3.5 checkpoint); stacked_experts: the hybrid
// families' expert storage in the file (nullopt: the family's own).
std::vector<TensorMapping> map_tensors(const model::ModelConfig& c, const model::ParamLayout& layout, HfFormat format,
                                       const std::string& prefix = "model.",
                                       std::optional<bool> stacked_experts = std::nullopt);

// The tokenizer file an imported checkpoint carries over from its source (if any).
inline constexpr const char* kHfTokenizerFile = "tokenizer.json";

}  // namespace gatedlm::io
