#include "kernels/bf16_support.h"

#include <atomic>
#include <dnnl.hpp>

namespace gatedlm::kernels {
namespace {

std::atomic<bool> g_force_emulation{false};

std::string isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::all: return "all";
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_mic: return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
  }
  return "unknown (" + std::to_string(static_cast<unsigned>(isa)) + ")";
}

// oneDNN's ISA values are nested bit sets: every ISA with the bf16 instructions contains
// the bits of avx512_core_bf16 (AMX included).
bool isa_has_bf16(dnnl::cpu_isa isa) {
  const auto bits = static_cast<unsigned>(isa), need = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  return (bits & need) == need;
}

// A trial bf16 x bf16 -> f32 product descriptor: the ISA alone does not promise that this
// oneDNN build has a bf16 matmul for it.
bool bf16_primitive_exists() {
  try {
    using dt = dnnl::memory::data_type;
    dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    dnnl::memory::desc a({16, 32}, dt::bf16, dnnl::memory::format_tag::ab);
    dnnl::memory::desc b({32, 16}, dt::bf16, dnnl::memory::format_tag::ab);
    dnnl::memory::desc c({16, 16}, dt::f32, dnnl::memory::format_tag::ab);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), engine);
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

Bf16Support probe() {
  Bf16Support s;
#if !defined(__x86_64__)
  // oneDNN's ISA values name x86 instruction sets; on other CPUs they say nothing here.
  s.isa = "non-x86";
  s.reason = "native bf16 products are x86-only in gatedlm (AVX512-BF16 or AMX)";
  return s;
#endif
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  s.isa = isa_name(isa);
  if (!isa_has_bf16(isa)) {
    s.reason = "oneDNN runs with the " + s.isa +
               " instruction set here, and bf16 products need AVX512-BF16 or AMX";
  } else if (!bf16_primitive_exists()) {
    s.reason = "this oneDNN build has no bf16 matrix product for the " + s.isa + " instruction set";
  } else {
    s.native = true;
  }
  return s;
}

}  // namespace

const Bf16Support& bf16_support() {
  static const Bf16Support support = probe();
  return support;
}

Bf16Path bf16_path() {
  return bf16_support().native && !g_force_emulation.load() ? Bf16Path::native : Bf16Path::emulated;
}

const char* bf16_path_name(Bf16Path path) { return path == Bf16Path::native ? "native" : "emulated"; }

void force_bf16_emulation(bool on) { g_force_emulation.store(on); }

std::string bf16_emulation_warning(const std::string& flag) {
  const Bf16Support& s = bf16_support();
  if (s.native) return "";
  return "warning: " + flag + ": " + s.reason +
         "; running the emulated bf16 path instead (operands rounded to bf16, products and sums in fp32: "
         "the same numerics, but slower than fp32). Use --precision fp32 for speed on this CPU.";
}

}  // namespace gatedlm::kernels
