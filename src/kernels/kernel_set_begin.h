// Opens the code of one kernel set in a kernel source compiled once per set (CMake passes
// GATEDLM_KSET_ID: 0 generic, 1 avx2, 2 avx512). Include it after every other header and
// before the set's code, which goes in `namespace gatedlm::kernels::GATEDLM_KSET`, and
// close with kernel_set_end.h. No include guard: once per translation unit.
//
// Why a pragma rather than -march per file: code compiled for AVX-512 must never be what
// the rest of the binary calls. Inline functions and templates of shared headers (the
// standard library's, ours) are emitted in every file that uses them and the linker
// keeps one copy; compiled under -march=x86-64-v4 that copy could be the AVX-512 one, and
// an AVX2 machine would then crash in, say, std::vector. Headers included before the
// pragma keep the baseline target; only the code between begin and end, in its own
// namespace per set, gets the wider one. GCC does not define __AVX512F__ and friends
// inside such a region, so the kernels test GATEDLM_KSET_AVX512 / GATEDLM_KSET_AVX2.
// Nothing in a set may run before the set is chosen: no namespace-scope objects with
// dynamic initialisation (their start-up code would carry the set's instructions).
#ifndef GATEDLM_KSET_ID
#error "kernel sources are compiled once per kernel set: GATEDLM_KSET_ID must be 0, 1 or 2 (see CMakeLists.txt)"
#endif

// Headers that the per-set headers (fast_math.h, attention_gemm.h) rely on, included
// here with the baseline target.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#if GATEDLM_KSET_ID == 0
// The build's baseline target: x86-64-v2 in the portable build; whatever -march=native
// gives in a native build (GATEDLM_SINGLE_KERNEL_SET), whose generic set may use AVX-512.
#define GATEDLM_KSET generic
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
#define GATEDLM_KSET_AVX512 1
#else
#define GATEDLM_KSET_AVX512 0
#endif
#if defined(__AVX2__) && defined(__FMA__)
#define GATEDLM_KSET_AVX2 1
#else
#define GATEDLM_KSET_AVX2 0
#endif
#elif GATEDLM_KSET_ID == 1
#define GATEDLM_KSET avx2
#define GATEDLM_KSET_AVX2 1
#define GATEDLM_KSET_AVX512 0
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx,avx2,bmi,bmi2,f16c,fma,lzcnt,movbe"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("arch=x86-64-v3")
#endif
#elif GATEDLM_KSET_ID == 2
#define GATEDLM_KSET avx512
#define GATEDLM_KSET_AVX2 1
#define GATEDLM_KSET_AVX512 1
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx,avx2,bmi,bmi2,f16c,fma,lzcnt,movbe,avx512f,avx512bw,avx512cd,avx512dq,avx512vl"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("arch=x86-64-v4")
#endif
#else
#error "GATEDLM_KSET_ID must be 0 (generic), 1 (avx2) or 2 (avx512)"
#endif
