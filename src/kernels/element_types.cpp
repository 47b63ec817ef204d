#include "kernels/element_types.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <iterator>

#include "core/error.h"
#include "kernels/half_float.h"
#include "kernels/kquant_blocks.h"
#include "kernels/quant_blocks.h"

namespace gatedlm::kernels {
namespace {

void f32_to_f32(float* out, const void* in, int64_t n) { std::memcpy(out, in, static_cast<size_t>(n) * 4); }
void f32_from_f32(void* out, const float* in, int64_t n) { std::memcpy(out, in, static_cast<size_t>(n) * 4); }

// The 16-bit floats as the file formats write them (round to nearest even; the same bits on
// every CPU): F16 through the kernel sets' row conversions, BF16 one value at a time.
void f16_to_f32_row(float* out, const void* in, int64_t n) { from_f16(out, static_cast<const uint16_t*>(in), n); }
void f16_from_f32_row(void* out, const float* in, int64_t n) { to_f16(static_cast<uint16_t*>(out), in, n); }
void bf16_to_f32_row(float* out, const void* in, int64_t n) {
  dequantize_row_bf16(out, static_cast<const uint16_t*>(in), n);
}
void bf16_from_f32_row(void* out, const float* in, int64_t n) {
  auto* h = static_cast<uint16_t*>(out);
  for (int64_t i = 0; i < n; ++i) h[i] = f32_to_bf16(in[i]);
}

// A block format's row conversions from its typed functions (kquant_blocks.h).
template <class Block, void (*Dequantize)(float*, const Block*, int64_t)>
void blocks_to_f32(float* out, const void* in, int64_t n) {
  Dequantize(out, static_cast<const Block*>(in), n);
}
template <class Block, void (*Quantize)(Block*, const float*, int64_t)>
void blocks_from_f32(void* out, const float* in, int64_t n) {
  Quantize(static_cast<Block*>(out), in, n);
}
#define GATEDLM_BLOCK_CONVERSIONS(Block, suffix) \
  blocks_to_f32<Block, dequantize_row_##suffix>, blocks_from_f32<Block, quantize_row_##suffix>

constexpr ElementType id(uint32_t ggml_id) { return static_cast<ElementType>(ggml_id); }

// ggml.c's type traits (ids 4, 5, 31-33 and 36-38 are types ggml removed: unknown here too).
// The rest (the IQ2/IQ3/IQ1 grids, the ternary and MXFP4 formats, Q8_1 / Q8_K, which only
// ggml's products use): name and geometry, no conversions.
constexpr ElementTraits kTypes[] = {
    {ElementType::f32, "F32", "f32", 1, 4, "F32", f32_to_f32, f32_from_f32, false},
    {ElementType::f16, "F16", "f16", 1, 2, "F16", f16_to_f32_row, f16_from_f32_row, false},
    {ElementType::q4_0, "Q4_0", "q4_0", 32, 18, nullptr, GATEDLM_BLOCK_CONVERSIONS(BlockQ4_0, q4_0), true},
    {ElementType::q4_1, "Q4_1", "q4_1", 32, 20, nullptr, GATEDLM_BLOCK_CONVERSIONS(BlockQ4_1, q4_1), true},
    {ElementType::q5_0, "Q5_0", "q5_0", 32, 22, nullptr, GATEDLM_BLOCK_CONVERSIONS(BlockQ5_0, q5_0), true},
    {ElementType::q5_1, "Q5_1", "q5_1", 32, 24, nullptr, GATEDLM_BLOCK_CONVERSIONS(BlockQ5_1, q5_1), true},
    {ElementType::q8_0, "Q8_0", "q8_0", 32, 34, nullptr, GATEDLM_BLOCK_CONVERSIONS(BlockQ8_0, q8_0), true},
    {id(9), "Q8_1", "q8_1", 32, 36, nullptr, nullptr, nullptr, false},
    {ElementType::q2_k, "Q2_K", "q2_k", 256, 84, nullptr, GATEDLM_BLOCK_CONVERSIONS(BlockQ2_K, q2_k), true},
    {ElementType::q3_k, "Q3_K", "q3_k", 256, 110, nullptr, GATEDLM_BLOCK_CONVERSIONS(BlockQ3_K, q3_k), true},
    {ElementType::q4_k, "Q4_K", "q4_k", 256, 144, nullptr, GATEDLM_BLOCK_CONVERSIONS(BlockQ4_K, q4_k), true},
    {ElementType::q5_k, "Q5_K", "q5_k", 256, 176, nullptr, GATEDLM_BLOCK_CONVERSIONS(BlockQ5_K, q5_k), true},
    {ElementType::q6_k, "Q6_K", "q6_k", 256, 210, nullptr, GATEDLM_BLOCK_CONVERSIONS(BlockQ6_K, q6_k), true},
    {id(15), "Q8_K", "q8_k", 256, 292, nullptr, nullptr, nullptr, false},
    {id(16), "IQ2_XXS", "iq2_xxs", 256, 66, nullptr, nullptr, nullptr, false},
    {id(17), "IQ2_XS", "iq2_xs", 256, 74, nullptr, nullptr, nullptr, false},
    {id(18), "IQ3_XXS", "iq3_xxs", 256, 98, nullptr, nullptr, nullptr, false},
    {id(19), "IQ1_S", "iq1_s", 256, 50, nullptr, nullptr, nullptr, false},
    {ElementType::iq4_nl, "IQ4_NL", "iq4_nl", 32, 18, nullptr, GATEDLM_BLOCK_CONVERSIONS(BlockIq4Nl, iq4_nl), true},
    {id(21), "IQ3_S", "iq3_s", 256, 110, nullptr, nullptr, nullptr, false},
    {id(22), "IQ2_S", "iq2_s", 256, 82, nullptr, nullptr, nullptr, false},
    {ElementType::iq4_xs, "IQ4_XS", "iq4_xs", 256, 136, nullptr, GATEDLM_BLOCK_CONVERSIONS(BlockIq4Xs, iq4_xs), true},
    {id(24), "I8", "i8", 1, 1, nullptr, nullptr, nullptr, false},
    {id(25), "I16", "i16", 1, 2, nullptr, nullptr, nullptr, false},
    {id(26), "I32", "i32", 1, 4, nullptr, nullptr, nullptr, false},
    {id(27), "I64", "i64", 1, 8, nullptr, nullptr, nullptr, false},
    {id(28), "F64", "f64", 1, 8, nullptr, nullptr, nullptr, false},
    {id(29), "IQ1_M", "iq1_m", 256, 56, nullptr, nullptr, nullptr, false},
    {ElementType::bf16, "BF16", "bf16", 1, 2, "BF16", bf16_to_f32_row, bf16_from_f32_row, true},
    {id(34), "TQ1_0", "tq1_0", 256, 54, nullptr, nullptr, nullptr, false},
    {id(35), "TQ2_0", "tq2_0", 256, 66, nullptr, nullptr, nullptr, false},
    {id(39), "MXFP4", "mxfp4", 32, 17, nullptr, nullptr, nullptr, false},
};
#undef GATEDLM_BLOCK_CONVERSIONS

// Whole blocks of k values, or a refusal naming the type.
int64_t checked_blocks(const ElementTraits& t, int64_t k) {
  if (k < 0 || k % t.block_values != 0)
    fail("a ", t.name, " row holds whole blocks of ", t.block_values, " values: row length ", k,
         " is not a multiple of ", t.block_values);
  return k / t.block_values;
}

// The rows by ggml id (ids run 0-39): one load per look-up, which every quantised product
// makes (quant_matmul's checks).
constexpr uint32_t kIdLimit = 40;
constexpr std::array<const ElementTraits*, kIdLimit> rows_by_id() {
  std::array<const ElementTraits*, kIdLimit> by_id{};
  for (const ElementTraits& t : kTypes) by_id[static_cast<uint32_t>(t.type)] = &t;
  return by_id;
}
constexpr std::array<const ElementTraits*, kIdLimit> kById = rows_by_id();


}  // namespace

std::span<const ElementTraits> element_types() { return kTypes; }

const ElementTraits* find_element_type(uint32_t ggml_id) { return ggml_id < kIdLimit ? kById[ggml_id] : nullptr; }



const ElementTraits& element_traits(ElementType type) {
  if (const ElementTraits* t = find_element_type(static_cast<uint32_t>(type))) return *t;
  fail("unknown element type id ", static_cast<uint32_t>(type));
}

ElementType narrow_row_type(ElementType type) {
  switch (type) {
    case ElementType::q2_k:
    case ElementType::q3_k: return ElementType::q4_0;
    case ElementType::iq4_xs: return ElementType::iq4_nl;
    case ElementType::q4_k: return ElementType::q5_0;
    case ElementType::q5_k: return ElementType::q5_1;
    case ElementType::q6_k: return ElementType::q8_0;
    default: return type;
  }
}

std::string element_names_readable() {
  std::string names;
  for (const ElementTraits& t : kTypes)
    if (t.to_f32) names += (names.empty() ? "" : ", ") + std::string(t.ggml_name);
  return names;
}

int64_t element_row_bytes(ElementType type, int64_t k) {
  const ElementTraits& t = element_traits(type);
  return checked_blocks(t, k) * t.block_bytes;
}

void element_to_f32(ElementType type, float* out, const void* in, int64_t k) {
  const ElementTraits& t = element_traits(type);
  checked_blocks(t, k);
  if (!t.to_f32) fail("gatedlm cannot read ", t.ggml_name, " values yet");
  t.to_f32(out, in, k);
}

void element_from_f32(ElementType type, void* out, const float* in, int64_t k) {
  const ElementTraits& t = element_traits(type);
  checked_blocks(t, k);
  if (!t.from_f32) fail("gatedlm cannot write ", t.ggml_name, " values yet");
  t.from_f32(out, in, k);
}

ElementType parse_element_type(const std::string& name, const std::string& flag, std::span<const ElementType> accepted) {
  std::string names;
  for (ElementType t : accepted) {
    if (name == element_name(t)) return t;
    names += std::string(names.empty() ? "" : " | ") + element_name(t);
  }
  fail(flag, " ", name, ": not one of the types taken here (", names, ")");
}

#undef GATEDLM_BLOCK_CONVERSIONS

}  // namespace gatedlm::kernels
