#pragma once
// Element types, one row each, in the manner of ggml's type traits (ggml.c): every type a
// GGUF file can name, with ggml's id, name and block geometry; and for the types gatedlm
// computes with, the name its flags take, the safetensors dtype, the conversions to and from
// fp32, and whether the products multiply by rows of it directly (kernels/quant_matmul.h).
// Nothing else lists types: file formats, checkpoints, the quantised weights and the
// products all read this table. A new weight type (the K-quants) is its row's conversions
// and kernels.
//
// Block layouts: F32 4 bytes a value; F16 IEEE binary16 and BF16 the top half of an fp32
// (half_float.h), 2 bytes a value; Q8_0 / Q4_0 blocks of 32 values (quant_blocks.h); Q4_1,
// Q5_0, Q5_1, IQ4_NL blocks of 32 and the K-quants and IQ4_XS super-blocks of 256
// (kquant_blocks.h).
#include <cstdint>
#include <span>
#include <string>

namespace gatedlm::kernels {

// ggml's type ids (ggml.h's enum ggml_type: the GGUF file format's numbers). Named: the
// types gatedlm converts; every other id of ggml has a row too (its name and geometry, no
// conversions), so that a file holding it is refused by name.
enum class ElementType : uint32_t {
  f32 = 0, f16 = 1, q4_0 = 2, q4_1 = 3, q5_0 = 6, q5_1 = 7, q8_0 = 8,
  q2_k = 10, q3_k = 11, q4_k = 12, q5_k = 13, q6_k = 14, iq4_nl = 20, iq4_xs = 23, bf16 = 30
};

struct ElementTraits {
  ElementType type;
  const char* ggml_name;  // "F32", "Q4_K", ... as ggml_type_name() spells it
  const char* name;       // gatedlm's name, what --dtype / --type take: "f32", "q4_0", ...
  int64_t block_values;   // values per block (1 for the plain types)
  int64_t block_bytes;    // bytes per block
  // The safetensors dtype of a checkpoint tensor of this type ("F32", "F16", "BF16"); null
  // for block types, which a checkpoint stores as U8 rows of blocks.
  const char* safetensors_dtype;
  // n values (whole blocks) to and from fp32, bit for bit ggml's reference conversions;
  // null where gatedlm has none (yet).
  void (*to_f32)(float* out, const void* in, int64_t n);
  void (*from_f32)(void* out, const float* in, int64_t n);
  // The products multiply by rows of this type without expanding them (quant_matmul).
  bool products;
};

// Every row, by ggml id.
std::span<const ElementTraits> element_types();
// The row of a ggml id as a file gives it; null for an id ggml does not define.
const ElementTraits* find_element_type(uint32_t ggml_id);
// The row of a type gatedlm names (throws for an id without a row).
const ElementTraits& element_traits(ElementType type);
inline const char* element_name(ElementType type) { return element_traits(type).name; }

// The type llama.cpp's quantiser writes instead of `type` for a row that is not a whole
// number of its 256-value super-blocks (llama.cpp's tensor_type_fallback): Q4_0 for Q2_K
// and Q3_K, IQ4_NL for IQ4_XS, Q5_0 for Q4_K, Q5_1 for Q5_K, Q8_0 for Q6_K; `type` itself
// for the others.
ElementType narrow_row_type(ElementType type);

// The ggml names of the types with conversions to fp32 ("F32, F16, Q4_0, ..."), for the
// messages that refuse the others.
std::string element_names_readable();

// Bytes of a row of k values; throws naming the type and k when k is negative or not a
// whole number of blocks.
int64_t element_row_bytes(ElementType type, int64_t k);
// One row of k values to and from fp32; throws as element_row_bytes, or naming the type
// when the row has no such conversion.
void element_to_f32(ElementType type, float* out, const void* in, int64_t k);
void element_from_f32(ElementType type, void* out, const float* in, int64_t k);

// The type named `name` (its element name: "q4_0") among `accepted`; throws naming `flag`,
// the value and the accepted names ("--type q5_1: not one of the types taken here (...)").
ElementType parse_element_type(const std::string& name, const std::string& flag, std::span<const ElementType> accepted);

}  // namespace gatedlm::kernels
