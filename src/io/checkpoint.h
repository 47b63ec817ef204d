#pragma once
// A checkpoint directory: config.json (the model config keys) + model.safetensors (F32
// weights under Hugging Face Qwen3 names, see model/param_layout.h).
#include <string>
#include <vector>

#include "model/config.h"
#include "model/param_layout.h"

namespace gatedlm::io {

struct Checkpoint {
  model::ModelConfig config;
  std::vector<float> params;  // laid out by model::ParamLayout(config)
};

// Creates dir if needed; each file is written atomically.
void save_checkpoint(const std::string& dir, const model::ModelConfig& config, const std::vector<float>& params);
// Checks names, shapes, dtype and file size; refuses missing, extra or truncated tensors.
Checkpoint load_checkpoint(const std::string& dir);

}  // namespace gatedlm::io
