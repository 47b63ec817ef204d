#pragma once
// A checkpoint directory: config.json (the model config keys) + model.safetensors (F32
// weights under Hugging Face Qwen3 names, see model/param_layout.h).
#include <span>
#include <string>
#include <vector>

#include "kernels/element_types.h"
#include "model/config.h"
#include "model/param_layout.h"

namespace gatedlm::io {

// The header metadata keys of a quantised checkpoint (io/quantized_checkpoint.h): its
// format, and every quantised tensor's. An F32 checkpoint has neither.
inline constexpr const char* kQuantizedKey = "gatedlm.quantized";
inline constexpr const char* kTensorFormatsKey = "gatedlm.tensor_formats";

struct Checkpoint {
  model::ModelConfig config;
  std::vector<float> params;  // laid out by model::ParamLayout(config)
};

// Creates dir if needed; each file is written atomically.
void save_checkpoint(const std::string& dir, const model::ModelConfig& config, std::span<const float> params);
// Checks names, shapes, dtype and file size; refuses missing, extra or truncated tensors.
// `dir` may also be a training run directory: its latest checkpoint is loaded.
Checkpoint load_checkpoint(const std::string& dir);
// The same in two steps, so that a model can be built first and its weights read straight
// into its own buffer (one copy of the weights in memory instead of two; large imported
// models need it): the config, then the weights into out (ParamLayout(config).total()).
model::ModelConfig load_checkpoint_config(const std::string& dir);
void load_checkpoint_weights(const std::string& dir, const model::ModelConfig& config, std::span<float> out);

// Throws naming `where` and the element's index when a value is NaN or infinite.
void require_finite(const float* values, int64_t n, const std::string& where);
// The same for `rows` rows of `cols` values stored as `type` (kernels/element_types.h),
// expanded a few rows at a time; names the row. `first_row`: the first row's number.
void require_finite_rows(kernels::ElementType type, const uint8_t* data, int64_t rows, int64_t cols,
                         const std::string& where, int64_t first_row = 0);
// Every tensor finite, and none that the model exponentiates (a Gated DeltaNet's A_log)
// beyond kMaxExpArgument, whose exp overflows float32. Throws naming `where`, the tensor
// and the element. save_checkpoint checks it before anything is written, and the imports
// with the source's name.
inline constexpr float kMaxExpArgument = 88.7f;  // log(FLT_MAX) = 88.72
void require_usable_weights(const model::ModelConfig& config, std::span<const float> params, const std::string& where);

// A checkpoint directory as given, or a run directory's latest checkpoint
// (RUN/latest names it, under RUN/checkpoints/). Throws when it is neither.
std::string resolve_checkpoint_dir(const std::string& path);

}  // namespace gatedlm::io
