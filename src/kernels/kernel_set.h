#pragma once
// The instruction sets the hand-written kernels are compiled for, and the one they run
// with. One binary carries every set (each kernel source is compiled once per set, see
// kernel_set_begin.h); at start-up the best set this CPU can execute is chosen, so a
// build made on an AVX-512 machine runs on an AVX2 one and the other way round.
//
//   generic  the build's baseline (x86-64-v2 on x86, the plain target elsewhere)
//   avx2     x86-64-v3: AVX2 + FMA (Intel Haswell, AMD Zen 1-3 and later)
//   avx512   x86-64-v4: AVX-512 F/BW/DQ/VL (Intel Skylake-SP, AMD Zen 4 and later)
//
// GATEDLM_KERNELS=generic|avx2|avx512 in the environment picks a set by hand (tests run
// every runnable set against the reference kernels this way; benchmarks compare them).
#include <string>
#include <vector>

namespace gatedlm::kernels {

enum class KernelSet { generic, avx2, avx512 };

const char* kernel_set_name(KernelSet set);
// Every set this binary carries that this CPU can execute, weakest first.
std::vector<KernelSet> runnable_kernel_sets();
bool kernel_set_runnable(KernelSet set);
// The set the kernels use: GATEDLM_KERNELS if given (an unknown or unrunnable name is an
// error naming the variable and the runnable sets), else the best runnable one.
KernelSet active_kernel_set();
// Switches the set for the rest of the process (tests); refuses sets the CPU cannot run.
void use_kernel_set(KernelSet set);
// "avx512 (runnable here: generic, avx2, avx512)": for --version and benchmark reports.
std::string kernel_set_summary();
// Whether the int8 kernels may use vpdpbusd (AVX512-VNNI in the avx512 set, AVX-VNNI in the
// avx2 set) where the CPU has it: yes unless GATEDLM_VNNI=0, which runs the vpmaddubsw kernels
// as a CPU without VNNI does (an AVX2-only Zen 3 or Haswell measured on a newer machine;
// tests). Any other value than 0 or 1 is an error naming the variable.
bool vnni_allowed();
// Whether the K-quant tile kernels, with one activation row, request the next tile's
// super-block into L2 beside each super-block's near request (quant_kint8.cpp, tiled_rows).
// By default on Intel CPUs only: the far request made 1B decode 1.1x (Q4_K_M) to 1.3x
// (IQ4_XS) faster on a Xeon with AVX512-VNNI and 1.1x slower on AMD Zen 5, whose own
// prefetchers already read that far (bench/RESULTS.md, "The far request on AMD Zen 5").
// GATEDLM_FAR_REQUEST=0|1 decides by hand (measuring a new CPU); any other value is an error
// naming the variable.
bool far_tile_requests();
// Why far_tile_requests() says what it says: for --version.
enum class FarTileRequests { intel, not_intel, environment };
FarTileRequests far_tile_requests_reason();

}  // namespace gatedlm::kernels
