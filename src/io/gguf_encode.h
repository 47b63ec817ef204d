#pragma once
// How GGUF export stores each tensor's values: the ggml type chosen per tensor for a file
// type (--dtype), and the rows encoded in it. ggml's type ids and llama.cpp's file types
// (general.file_type, LLAMA_FTYPE_*) are the values ggml.h and llama.h give them.
//
// Which tensors keep F32, following llama.cpp (convert_hf_to_gguf.py and llama-quantize):
// 1-D tensors (norms, ffn_gate_inp_shexp), every *_norm.weight, the MoE routers
// (ffn_gate_inp.weight) and ssm_conv1d. The others take the file's type, except:
//   - a row that is not a whole number of 32-value blocks falls back to F16, as llama.cpp's
//     converter and quantiser do; a row that is a whole number of 32-value blocks but not of
//     a K-quant's 256-value super-blocks takes llama.cpp's fallback type
//     (kernels::narrow_row_type: Q4_0, IQ4_NL, Q5_0, Q5_1 or Q8_0);
//   - in a Q4_0 file the output matrix (output.weight, or token_embd.weight when the
//     embeddings are tied) is Q8_0: llama-quantize writes Q6_K there (Q8_0 when its rows
//     are not a multiple of 256), a type gatedlm does not write.
// The token embedding is stored in the file's type, as llama.cpp does. The K-quant file
// types are one type for every matrix: a q6_k file is llama.cpp's MOSTLY_Q6_K, tensor for
// tensor and byte for byte (tests/reference/test_quant_llama.py). The mixes q3_k_m, q4_k_m
// and q5_k_m choose a type per tensor as llama-quantize does (gguf_tensor_types).
#include <cstdint>
#include <string>
#include <vector>

#include "io/gguf_tensor.h"
#include "kernels/element_types.h"
#include "model/config.h"
#include "model/quantized_weights.h"
#include "model/weight_recipes.h"

namespace gatedlm::io {

// What --dtype takes for a GGUF file: every uniform recipe and the mixes gatedlm writes
// (model/weight_recipes.h); throws naming --dtype and the accepted values.
const model::WeightRecipe& parse_gguf_dtype(const std::string& name);
// llama.cpp's LLAMA_FTYPE for the file (model/weight_recipes.h: MOSTLY_Q4_0 2, MOSTLY_Q8_0 7,
// MOSTLY_Q4_K_S 14 for one type throughout, ...).
uint32_t gguf_file_type(kernels::ElementType dtype);

// The type of each of `tensors` (in file order) in a file of `recipe`: gguf_stored_type for
// a uniform one; for a mix, llama.cpp's choice (model::mix_tensor_type, counting the
// tensors in llama-quantize's order: by layer, then name), then its fallback for rows that
// are not whole blocks of that type, F32 where llama.cpp keeps F32.
std::vector<kernels::ElementType> gguf_tensor_types(const std::vector<GgufTensor>& tensors, const model::ModelConfig& c,
                                                    const model::WeightRecipe& recipe);

// The formats of a checkpoint of `recipe` (what `quantize --type` writes): a uniform one's
// model::uniform_formats; a mix's types, chosen as for the model's GGUF file
// (gguf_tensor_types over its tensors in the architecture export picks), each parameter in
// the type of the tensor that holds it where the products read that type (else F32).
// Throws naming the mix when the model has no GGUF form.
model::WeightFormats recipe_formats(const model::ModelConfig& c, const model::WeightRecipe& recipe);

// The type a tensor is stored in by a uniform recipe of `dtype` (rules above); `output`
// marks the output matrix.
kernels::ElementType gguf_stored_type(const std::string& name, const std::vector<int64_t>& shape,
                                      kernels::ElementType dtype, bool output);

// Appends `rows` rows of k F32 values to `out`, encoded as `type` (its row of
// kernels/element_types.h: F16 and BF16 round to nearest even, Q8_0 / Q4_0 as
// kernels/quant_blocks.h).
void encode_ggml_rows(std::string& out, const float* values, int64_t rows, int64_t k, kernels::ElementType type);

}  // namespace gatedlm::io
