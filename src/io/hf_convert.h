#pragma once
// Import of Hugging Face model directories (the paper's released checkpoints, transformers'
// Qwen3, Qwen3-Next, Qwen3.5) into gatedlm checkpoints, and export back, through the name tables of
// io/hf_names.h and the config mapping of io/hf_config.h.
#include <optional>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "io/hf_config.h"
#include "io/hf_weights.h"

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

// Writes `out_dir`/config.json and model.safetensors in `format`, weights in `dtype`.
// Refuses a config the format cannot express (io/hf_config.h) before writing anything.
void export_hf(const Checkpoint& ck, HfFormat format, kernels::ElementType dtype, const std::string& out_dir);

// The tokenizer file an imported checkpoint carries over from its source (if any).
inline constexpr const char* kHfTokenizerFile = "tokenizer.json";

}  // namespace gatedlm::io
