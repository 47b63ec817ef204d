#pragma once
// A model's weight matrices held as GGUF blocks (kernels/quant_blocks.h) for inference.
//
// Which tensors are quantised (quantized_tensor below): every 2-D weight matrix whose
// input width (columns) is a multiple of 32, i.e. the attention q/k/v/o projections, the
// gate projections that read the hidden state, the FFN gate/up/down, the MoE experts and
// shared expert, the switch-head experts, the linear-attention projections, the token
// embedding and the LM head (llama.cpp's quantiser quantises token_embd and output too;
// a Q4_0 checkpoint keeps the output matrix in Q8_0, see tensor_format).
// These stay F32: 1-D tensors (norms, biases, vector gates, decays), the MoE router
// (mlp.gate.weight) and the shared expert's gate (mlp.shared_expert_gate.weight), the
// switch-head routers (llama.cpp keeps ffn_gate_inp F32 for the same reason: few rows,
// and routing decisions are sensitive), conv1d kernels, and every matrix whose input
// width is not a whole number of 32-value blocks.
//
// How products find the blocks: the model keeps its flat fp32 buffer (ParamLayout); a
// QuantizedWeights attached to a model is its kernels::WeightStore: each of the model's
// weight views then carries its rows of blocks (kernels/weight.h), and the products
// multiply those. Consecutive quantised tensors of the same width form one
// segment of rows, so the model's fused products (q|k|v|gate, gate_proj|up_proj) read one
// block matrix, through kernels::quant_matmul at any number of rows (it reads the blocks
// directly for decode and picks int8 dot products or fp32 tiles for prefill, per kernel
// set: kernels/quant_matmul.h); the embedding lookup expands its rows from the blocks too.
// The fp32 values of the quantised tensors in the model's buffer are the dequantised blocks
// (so anything that reads them, e.g. analysis, sees the same weights), or zeros once
// release_f32() has handed their pages back to the system.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/aligned_allocator.h"
#include "kernels/element_types.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_matmul.h"
#include "kernels/weight.h"
#include "model/model.h"
#include "model/param_layout.h"

namespace gatedlm::model {

// Whether a checkpoint quantised to any format stores this tensor quantised (else F32).
bool quantized_tensor(const ParamSpec& spec);
// The format a tensor is stored in for a checkpoint of `type`, nullopt for F32: `type`,
// except that a Q4_0 checkpoint keeps its output matrix (lm_head, or the token embedding
// when tied) in Q8_0, as gatedlm's GGUF export does (llama-quantize writes Q6_K there), and
// that a row narrower than a whole number of `type`'s blocks (a K-quant's 256 values) takes
// the 32-value type llama.cpp's quantiser falls back to (kernels::narrow_row_type).
std::optional<kernels::ElementType> tensor_format(const ParamLayout& layout, const ParamSpec& spec,
                                                  kernels::ElementType type);

// The element type of every stored tensor of a model, by parameter name (the tensors not
// named stay F32), and what the mix is called: a type ("q8_0"), a recipe ("q4_k_m"), or a
// GGUF file's own mix of types (io/gguf_import.h).
struct WeightFormats {
  std::string name;
  std::map<std::string, kernels::ElementType> tensors;
  std::optional<kernels::ElementType> of(const ParamSpec& spec) const;
};
// Every tensor of a checkpoint of `type`, each in its tensor_format; named after `type`.
WeightFormats uniform_formats(const ParamLayout& layout, kernels::ElementType type);

class QuantizedWeights final : public kernels::WeightStore {
 public:
  // Room for the blocks of the tensors `formats` names, each in its type (filled by
  // quantize_from or through tensor_bytes). Each must be a tensor of `layout` that
  // quantized_tensor() admits, in a type the products read (its row's `products`), its rows
  // a whole number of that type's blocks; else throws naming the tensor.
  QuantizedWeights(const ParamLayout& layout, WeightFormats formats);
  // Every tensor in its tensor_format for a checkpoint of `type` (uniform_formats).
  QuantizedWeights(const ParamLayout& layout, kernels::ElementType type);
  ~QuantizedWeights() override;
  QuantizedWeights(const QuantizedWeights&) = delete;
  QuantizedWeights& operator=(const QuantizedWeights&) = delete;

  const WeightFormats& formats() const { return formats_; }
  // The blocks of one quantised tensor: rows * element_row_bytes(its format, cols) bytes.
  std::span<uint8_t> tensor_bytes(const ParamSpec& spec);
  std::span<const uint8_t> tensor_bytes(const ParamSpec& spec) const;
  int64_t bytes() const;  // all blocks held

  // Quantises the tensors from fp32 values laid out by the layout.
  void quantize_from(std::span<const float> params);
  // Writes the dequantised values of every quantised tensor into params.
  void dequantize_into(std::span<float> params) const;

  // Becomes the weight store of `model` (its buffer holding the dequantised values already;
  // same layout): the model's weight views carry their blocks from then on. detach() or
  // destruction hands the model back its plain values; the model must outlive the
  // attachment. One model at a time (any number of QuantizedWeights, one per model). Where
  // the kernel set reads them (kernels::quant_tiles_pay), the blocks of those formats are then
  // arranged in tiles of 16 rows (kernels/quant_tiles.h) for good: tensor_bytes() and
  // quantize_from() refuse from there on, dequantize_into() and the products read either layout.
  void attach(Model<float>& model);
  void detach();
  // Returns the fp32 pages of the quantised tensors to the system (the products and the
  // embedding lookup read the blocks): the buffer then reads zeros there. Returns the bytes
  // released. Needs attach() first.
  int64_t release_f32();

  // The weight at `values` in the attached model's buffer: its rows of blocks when a
  // quantised tensor starts a row there, else plain values (kernels::WeightStore).
  kernels::Weight<float> weight(const float* values) const override;
  int64_t plain_values(const float* values) const override;

 private:
  // Consecutive quantised tensors of one width and format: rows [0, rows) of `cols` values
  // each, standing for the fp32 elements [begin, begin + rows * cols) of the model's buffer.
  struct Segment {
    int64_t begin = 0, rows = 0, cols = 0;
    kernels::ElementType format;
    CacheLineVector<uint8_t> blocks;  // 64-byte aligned: the BF16 kernels load whole lines
    int64_t tiled_rows = 0;           // rows [0, tiled_rows) in tiles (kernels/quant_tiles.h)
    kernels::QuantWeights weights() const { return {format, blocks.data(), rows, cols, tiled_rows}; }
  };
  const Segment* segment_at(int64_t offset) const;
  void arrange_tiles();
  bool tiled() const;

  ParamLayout layout_;
  WeightFormats formats_;
  std::vector<Segment> segments_;  // in offset order
  Model<float>* model_ = nullptr;  // attached to
  const float* base_ = nullptr;     // its buffer
  int64_t total_ = 0;
};

// Quantises a model's weights in place for inference: the blocks of its quantised tensors,
// its buffer then holding their dequantised values, attached to it (and the fp32 pages
// released when asked, see release_f32). The model must outlive the result.
std::unique_ptr<QuantizedWeights> quantize_model(Model<float>& model, WeightFormats formats, bool release_f32);
std::unique_ptr<QuantizedWeights> quantize_model(Model<float>& model, kernels::ElementType format, bool release_f32);

}  // namespace gatedlm::model
