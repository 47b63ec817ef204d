#pragma once
// Subnormal floats flushed to zero on a thread for the span of a scope, and a thread's
// floating-point mode carried into the threads that share its work.
//
// Why: a product or sum whose inputs or result are subnormal (below 1.2e-38 in fp32, 2.2e-308
// in fp64) takes a microcode assist of a hundred cycles or more per operation on Intel cores.
// The chunked delta rule of heads that decay fast makes them by the thousand: its decays
// e^(G_t - G_j) and e^G, with log decays down to -20 a token as Qwen3.5's initialisation gives
// them, pass through that range on their way to zero, and the small products that read them
// ran 5-11x slower (bench/RESULTS.md, "Subnormals flushed in the delta rule"). Flushed, each
// such value becomes 0: it changes a result by less than the flushed value itself.
//
// x86-64: MXCSR's FTZ (results flushed) and DAZ (inputs read as zero) bits, which SSE, AVX and
// AVX-512 code (oneDNN's JIT kernels included) honours; AArch64: FPCR.FZ, which does both;
// elsewhere nothing is changed. The mode is per thread, and OpenMP's workers do not take it
// from the thread that opens a parallel region: code that shares flushed work among threads
// gives each thread the caller's mode (FloatControlScope), else a value computed on a worker
// and on the caller could differ and the bits would depend on the thread count.
#include <cstdint>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace gatedlm::kernels {

// A thread's floating-point mode: its control register, as read by float_control().
using FloatControl = uint64_t;

#if defined(__x86_64__)
// MXCSR without its six sticky exception flags (bits 0-5), which record what happened, not
// what is wanted: setting a mode keeps the flags as they are.
inline constexpr FloatControl kFlushSubnormalBits = (1u << 15) | (1u << 6);  // FTZ | DAZ
inline constexpr unsigned kMxcsrFlags = 0x3f;
inline FloatControl float_control() { return _mm_getcsr() & ~kMxcsrFlags; }
inline void set_float_control(FloatControl c) {
  _mm_setcsr(static_cast<unsigned>(c) | (_mm_getcsr() & kMxcsrFlags));
}
#elif defined(__aarch64__)
inline constexpr FloatControl kFlushSubnormalBits = FloatControl{1} << 24;  // FPCR.FZ
inline FloatControl float_control() {
  FloatControl c;
  asm volatile("mrs %0, fpcr" : "=r"(c));
  return c;
}
inline void set_float_control(FloatControl c) { asm volatile("msr fpcr, %0" : : "r"(c)); }
#else
inline constexpr FloatControl kFlushSubnormalBits = 0;
inline FloatControl float_control() { return 0; }
inline void set_float_control(FloatControl) {}
#endif

// This thread runs in mode `wanted` until the scope ends, then in the mode it had.
class FloatControlScope {
 public:
  explicit FloatControlScope(FloatControl wanted) : saved_(float_control()) {
    if (wanted != saved_) set_float_control(wanted);
  }
  ~FloatControlScope() {
    if (float_control() != saved_) set_float_control(saved_);
  }
  FloatControlScope(const FloatControlScope&) = delete;
  FloatControlScope& operator=(const FloatControlScope&) = delete;

 private:
  FloatControl saved_;
};

// This thread flushes subnormal inputs and results to zero until the scope ends.
class SubnormalsFlushed : public FloatControlScope {
 public:
  SubnormalsFlushed() : FloatControlScope(float_control() | kFlushSubnormalBits) {}
};

}  // namespace gatedlm::kernels
