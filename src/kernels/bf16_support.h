#pragma once
// Where bf16 matrix products run. oneDNN multiplies bf16 operands on bf16 hardware
// (AVX512-BF16 or AMX); without it (AVX2-only CPUs such as AMD Zen 3, AVX-512 CPUs
// without BF16, or oneDNN capped by ONEDNN_MAX_CPU_ISA) it has no usable bf16 product,
// and the bf16 scope of matmul<float> falls back to an emulation with the same numerics:
// both operands rounded to bf16 (round to nearest even), multiplied and accumulated in
// fp32 by the fp32 product. A product of two bf16 values is exact in fp32, so the two
// paths differ only in the order of the fp32 sums, and the emulation is slower than a
// plain fp32 product (two extra rounding passes).
#include <cstdint>
#include <string>

namespace gatedlm::kernels {

enum class Bf16Path { native, emulated };

struct Bf16Support {
  bool native = false;   // oneDNN runs bf16 products on bf16 units here
  std::string isa;       // oneDNN's effective instruction set, e.g. "avx2", "avx512_core_bf16"
  std::string reason;    // when !native: what is missing, for messages
};

// Probed once per process (oneDNN's effective ISA and a trial bf16 primitive).
const Bf16Support& bf16_support();

// The path the bf16 scope takes now: native where supported unless emulation is forced.
Bf16Path bf16_path();
const char* bf16_path_name(Bf16Path path);

// Forces the emulated path even where native products exist (tests compare the two;
// benchmarks can time the emulation). Process-wide; not for use while products run.
void force_bf16_emulation(bool on);

// The one-line warning printed when --precision bf16 has to run emulated ("" when native).
std::string bf16_emulation_warning(const std::string& flag);

// out[i] = in[i] rounded to the nearest bf16 (ties to even), kept in fp32 storage; NaN
// stays NaN. The operand rounding of the emulated path (a kernel: float16_convert.cpp).
void round_to_bf16(float* out, const float* in, int64_t n);

}  // namespace gatedlm::kernels
