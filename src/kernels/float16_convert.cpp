// Whole rows of 16-bit floats, compiled once per kernel set (kernel_set_begin.h). to_bf16 and
// round_to_bf16: fp32 -> bf16 with round to nearest even, NaN kept quiet, as bits or as the
// rounded fp32 value. to_f16 and from_f16: fp32 <-> IEEE binary16 (half_float.h), eight values
// per F16C instruction in the avx2 and avx512 sets, one at a time in the generic set. The avx512 set uses the AVX512-BF16 conversion
// instruction where the CPU has it (checked at run time: x86-64-v4 does not include it).
#include "kernels/half_float.h"
#include "kernels/kernel_sets.h"

#include "kernels/kernel_set_begin.h"

namespace gatedlm::kernels::GATEDLM_KSET {
namespace {

// The bit-level rule: the upper 16 bits of x rounded to nearest even; NaN stays a quiet NaN.
inline uint16_t bf16_bits(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const bool nan = (bits & 0x7fffffffu) > 0x7f800000u;
  const uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
  return nan ? static_cast<uint16_t>((bits >> 16) | 0x40u) : static_cast<uint16_t>(rounded >> 16);
}

void to_bf16_rounding(uint16_t* out, const float* in, int64_t n) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) out[j] = bf16_bits(in[j]);
}

#if GATEDLM_KSET_AVX512
// The AVX512-BF16 instruction rounds to nearest even too, 16 values per instruction; it
// flushes denormal inputs to signed zero (values below 1.2e-38 that no product notices).
__attribute__((target("avx512bf16"))) void to_bf16_instruction(uint16_t* out, const float* in, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(in + i));
    std::memcpy(out + i, &h, sizeof(h));
  }
  to_bf16_rounding(out + i, in + i, n - i);
}
#endif

}  // namespace

void to_bf16(uint16_t* out, const float* in, int64_t n) {
#if GATEDLM_KSET_AVX512
  // Asked on first use, never at start-up: code in a kernel set must not run on CPUs
  // that lack the set's instructions, and a static initialiser here would.
  static const bool has_instruction = (__builtin_cpu_init(), __builtin_cpu_supports("avx512bf16"));
  if (has_instruction) return to_bf16_instruction(out, in, n);
#endif
  to_bf16_rounding(out, in, n);
}

void round_to_bf16(float* out, const float* in, int64_t n) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) out[j] = std::bit_cast<float>(static_cast<uint32_t>(bf16_bits(in[j])) << 16);
}

// F16C where the set has it: the portable generic set targets x86-64-v2, which lacks it.
#if (GATEDLM_KSET_ID != 0 && GATEDLM_KSET_AVX2) || defined(__F16C__)
#define GATEDLM_HAS_F16C 1
#else
#define GATEDLM_HAS_F16C 0
#endif

// vcvtps2ph rounds to nearest even as f32_to_f16 does, keeps subnormal results (MXCSR's FTZ
// does not apply to it) and overflows past 65520 to infinity; a NaN stays a NaN but keeps its
// payload's top bits where f32_to_f16 writes the one quiet NaN.
void to_f16(uint16_t* out, const float* in, int64_t n) {
  int64_t i = 0;
#if GATEDLM_HAS_F16C
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
  for (; i < n; ++i) out[i] = f32_to_f16(in[i]);
}

// Exact; vcvtph2ps makes a signalling NaN quiet, f16_to_f32 keeps it signalling.
void from_f16(float* out, const uint16_t* in, int64_t n) {
  int64_t i = 0;
#if GATEDLM_HAS_F16C
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
#endif
  for (; i < n; ++i) out[i] = f16_to_f32(in[i]);
}

#undef GATEDLM_HAS_F16C

}  // namespace gatedlm::kernels::GATEDLM_KSET

#include "kernels/kernel_set_end.h"
