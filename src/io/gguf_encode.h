#pragma once
// How GGUF export stores each tensor's values: the ggml type chosen per tensor for a file
// type (--dtype), and the rows encoded in it. ggml's type ids and llama.cpp's file types
// (general.file_type, LLAMA_FTYPE_*) are the values ggml.h and llama.h give them.
//
// Which tensors keep F32, following llama.cpp (convert_hf_to_gguf.py and llama-quantize):
// 1-D tensors (norms, ffn_gate_inp_shexp), every *_norm.weight, the MoE routers
// (ffn_gate_inp.weight) and ssm_conv1d. The others take the file's type, except:
//   - a row that is not a whole number of 32-value blocks (Q8_0, Q4_0) falls back to F16,
//     as llama.cpp's converter and quantiser do;
//   - in a Q4_0 file the output matrix (output.weight, or token_embd.weight when the
//     embeddings are tied) is Q8_0: llama-quantize writes Q6_K there (Q8_0 when its rows
//     are not a multiple of 256), a type gatedlm does not write.
// The token embedding is stored in the file's type, as llama.cpp does.
#include <cstdint>
#include <string>
#include <vector>

namespace gatedlm::io {

enum class GgufDtype { f32, f16, bf16, q8_0, q4_0 };
// "f32" | "f16" | "bf16" | "q8_0" | "q4_0"; throws naming --dtype and the accepted values.
GgufDtype parse_gguf_dtype(const std::string& name);
// llama.cpp's LLAMA_FTYPE for the file: ALL_F32 0, MOSTLY_F16 1, MOSTLY_Q4_0 2,
// MOSTLY_Q8_0 7, MOSTLY_BF16 32.
uint32_t gguf_file_type(GgufDtype dtype);

enum class GgmlType : uint32_t { f32 = 0, f16 = 1, q4_0 = 2, q8_0 = 8, bf16 = 30 };
const char* ggml_type_name(GgmlType type);  // "F32", "F16", "Q4_0", "Q8_0", "BF16"

// The type a tensor is stored in (rules above); `output` marks the output matrix.
GgmlType gguf_stored_type(const std::string& name, const std::vector<int64_t>& shape, GgufDtype dtype, bool output);

// Bytes of one row of k values in `type` (k a multiple of 32 for Q8_0 and Q4_0).
int64_t ggml_row_bytes(GgmlType type, int64_t k);
// Appends `rows` rows of k F32 values to `out`, encoded as `type` (ggml's own encodings:
// F16 and BF16 round to nearest even, Q8_0 / Q4_0 as kernels/quant_blocks.h).
void encode_ggml_rows(std::string& out, const float* values, int64_t rows, int64_t k, GgmlType type);

}  // namespace gatedlm::io
