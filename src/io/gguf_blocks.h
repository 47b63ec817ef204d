#pragma once
// A GGUF file's quantised tensors kept as their blocks (model/quantized_weights.h) instead of
// expanded to F32: what a model loaded from a Q4_K_M file holds is then about the file's size.
//
// A tensor stays in its blocks when its type is one the products read (its row of
// kernels/element_types.h has `products`: BF16 and every block type), it holds its
// parameters' values as they are (no value map, io/gguf_tensor.h), each of its runs (runs
// that continue each other joined) is whole rows of a parameter of the same width (the tables reorder heads as whole rows;
// stacked experts are one parameter each), every parameter it touches lies wholly in it, and
// each is a tensor model::quantized_tensor admits. Every other tensor (F32 and F16 ones,
// norms, routers, ssm_out of a hybrid with more value heads than key heads, whose heads
// are reordered within its rows) is read as
// F32, as before.
#include <span>
#include <string>
#include <vector>

#include "io/gguf_reader.h"
#include "io/gguf_tensor.h"
#include "model/quantized_weights.h"

namespace gatedlm::io {

// Whether `t` stays in its blocks (the rules above).
bool gguf_keeps_blocks(const GgufReader& f, const GgufTensor& t);

// The formats of the parameters held by the tensors that stay in their blocks, named after
// the file's general.file_type (model/weight_recipes.h; "gguf" when it names none); no
// tensors when none stays.
model::WeightFormats gguf_block_formats(const GgufReader& f, const std::vector<GgufTensor>& wanted);

// Copies `t`'s blocks, run by run, into its parameters' rows in `blocks`, checking that
// every value they stand for is finite (naming the tensor and the row).
void read_gguf_blocks(GgufReader& f, const GgufTensor& t, model::QuantizedWeights& blocks);

}  // namespace gatedlm::io
