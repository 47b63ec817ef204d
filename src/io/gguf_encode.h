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
// types are one type for every matrix (llama.cpp's _S/_M recipes, a type per tensor, are
// not written yet): a q6_k file is llama.cpp's MOSTLY_Q6_K, tensor for tensor and byte for
// byte (tests/reference/test_quant_llama.py).
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/element_types.h"

namespace gatedlm::io {

// The types --dtype takes for a GGUF file (kernels/element_types.h names them).
inline constexpr kernels::ElementType kGgufFileTypes[] = {
    kernels::ElementType::f32,  kernels::ElementType::f16,  kernels::ElementType::bf16,   kernels::ElementType::q8_0,
    kernels::ElementType::q6_k, kernels::ElementType::q5_k, kernels::ElementType::q5_1,   kernels::ElementType::q5_0,
    kernels::ElementType::q4_k, kernels::ElementType::iq4_xs, kernels::ElementType::iq4_nl, kernels::ElementType::q4_1,
    kernels::ElementType::q4_0, kernels::ElementType::q3_k, kernels::ElementType::q2_k};
// One of kGgufFileTypes by name; throws naming --dtype and the accepted values.
kernels::ElementType parse_gguf_dtype(const std::string& name);
// llama.cpp's LLAMA_FTYPE for the file: ALL_F32 0, MOSTLY_F16 1, MOSTLY_Q4_0 2, MOSTLY_Q4_1 3,
// MOSTLY_Q8_0 7, MOSTLY_Q5_0 8, MOSTLY_Q5_1 9, MOSTLY_Q2_K 10, MOSTLY_Q3_K_S 11,
// MOSTLY_Q4_K_S 14, MOSTLY_Q5_K_S 16, MOSTLY_Q6_K 18, MOSTLY_IQ4_NL 25, MOSTLY_IQ4_XS 30,
// MOSTLY_BF16 32 (one type throughout is nearest to the _S recipes).
uint32_t gguf_file_type(kernels::ElementType dtype);

// The type a tensor is stored in (rules above); `output` marks the output matrix.
kernels::ElementType gguf_stored_type(const std::string& name, const std::vector<int64_t>& shape,
                                      kernels::ElementType dtype, bool output);

// Appends `rows` rows of k F32 values to `out`, encoded as `type` (its row of
// kernels/element_types.h: F16 and BF16 round to nearest even, Q8_0 / Q4_0 as
// kernels/quant_blocks.h).
void encode_ggml_rows(std::string& out, const float* values, int64_t rows, int64_t k, kernels::ElementType type);

}  // namespace gatedlm::io
