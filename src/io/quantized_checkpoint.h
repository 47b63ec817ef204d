#pragma once
// Inference checkpoints: `gatedlm quantize` writes a checkpoint directory (config.json +
// model.safetensors, as io/checkpoint.h) whose weight matrices are stored in one of GGUF's
// formats (model/quantized_weights.h says which tensors; the rest stay F32):
//   bf16:        dtype "BF16", shape [rows, cols] (safetensors' own bfloat16)
//   the blocks: dtype "U8", shape [rows, element_row_bytes(format, cols)]: GGUF's blocks
//                (kernels/quant_blocks.h), row after row, byte for byte
// The header's __metadata__ records the name of the checkpoint's formats under
// "gatedlm.quantized" (a type, "q4_0", a recipe, "q4_k_m", or a GGUF file's file type) and
// every quantised tensor's format under "gatedlm.tensor_formats" (a JSON object, tensor
// name -> "bf16" | "q8_0" | "q4_k" | ...; a q4_0 checkpoint's output matrix is q8_0, as in
// gatedlm's GGUF export). Loading takes the recorded formats as they are, each checked
// against the tensor it names (model::QuantizedWeights). Training and resuming refuse such a checkpoint
// (load_checkpoint_weights); the inference commands load it through io/model_loader.h.
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "io/checkpoint.h"
#include "kernels/element_types.h"
#include "kernels/quant_blocks.h"
#include "model/model.h"
#include "model/quantized_weights.h"

namespace gatedlm::io {


// "bf16" | "q8_0" | "q4_0"; anything else fails naming `flag` and the accepted values.
kernels::ElementType parse_quant_format(const std::string& text, const std::string& flag);

// The name of a checkpoint's (or run directory's) weight formats, as `quantize` or `import`
// recorded it (model::WeightFormats: "q8_0", "q4_k_m", ...); nullopt for F32. Reads the
// safetensors header only.
std::optional<std::string> checkpoint_quant_format(const std::string& path);

struct QuantizeSummary {
  int64_t quantized_tensors = 0, f32_tensors = 0;
  int64_t f32_bytes = 0, written_bytes = 0;  // the weights before, model.safetensors after
  std::vector<std::string> narrow_matrices;  // matrices left F32: input width not a multiple of 32
};

// Writes the quantised checkpoint of F32 weights (laid out by ParamLayout(config)), each
// tensor in its format (model::WeightFormats; model::uniform_formats for one type), into
// out_dir: both files are written to temporaries first and renamed at the end, so an error
// leaves no checkpoint behind (and removes out_dir when this call created it).
QuantizeSummary save_quantized_checkpoint(const std::string& out_dir, const model::ModelConfig& config,
                                          std::span<const float> params, const model::WeightFormats& formats);
// The same for weights already in blocks (not attached to a model): the tensors `blocks`
// holds are written as they are, the others from params (a GGUF file imported with its types).
QuantizeSummary save_quantized_checkpoint(const std::string& out_dir, const model::ModelConfig& config,
                                          std::span<const float> params, const model::QuantizedWeights& blocks);

// The model of a checkpoint directory (resolved: resolve_checkpoint_dir), F32 or quantised.
// F32: as load_checkpoint, read straight into the model's buffer. Quantised: F32 tensors as
// stored, the blocks checked (shape, dtype, recorded format, finite values) and kept, the
// model's buffer holding their dequantised values; with release_f32 the fp32 pages of the
// matrices that only products read are then given back (QuantizedWeights::release_f32).
// Every command reaches it through io/model_loader.h.
struct CheckpointModel {
  std::unique_ptr<model::Model<float>> model;
  // The blocks of a quantised checkpoint, attached to model's buffer (null for F32).
  // Declared after model: destroyed (and detached) first.
  std::unique_ptr<model::QuantizedWeights> quantized;
};
CheckpointModel read_checkpoint_model(const std::string& checkpoint_dir, bool release_f32);

}  // namespace gatedlm::io
