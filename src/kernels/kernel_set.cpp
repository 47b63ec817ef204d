#include "kernels/kernel_set.h"

#include <atomic>
#include <cstdlib>

#include "core/error.h"

namespace gatedlm::kernels {
namespace {

constexpr KernelSet kAllSets[] = {KernelSet::generic, KernelSet::avx2, KernelSet::avx512};

bool cpu_can_run(KernelSet set) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(GATEDLM_SINGLE_KERNEL_SET)
  __builtin_cpu_init();
  switch (set) {
    case KernelSet::generic: return true;
#if defined(__clang__)  // clang (the fuzz build) names features, not levels: the levels' parts
    case KernelSet::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2");
    case KernelSet::avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") && cpu_can_run(KernelSet::avx2);
#else
    // libgcc's checks include the operating system's support for the wider registers.
    case KernelSet::avx2: return __builtin_cpu_supports("x86-64-v3");
    case KernelSet::avx512: return __builtin_cpu_supports("x86-64-v4");
#endif
  }
  return false;
#else
  return set == KernelSet::generic;  // native and non-x86 builds carry the generic set alone
#endif
}

std::string runnable_list() {
  std::string out;
  for (KernelSet s : kAllSets)
    if (cpu_can_run(s)) out += (out.empty() ? "" : ", ") + std::string(kernel_set_name(s));
  return out;
}

KernelSet parse_or_fail(const std::string& name) {
  for (KernelSet s : kAllSets)
    if (name == kernel_set_name(s)) {
      if (!cpu_can_run(s))
        fail("GATEDLM_KERNELS=", name, ": this CPU cannot run that kernel set (runnable here: ", runnable_list(), ")");
      return s;
    }
  fail("GATEDLM_KERNELS=", name, ": unknown kernel set (generic, avx2 or avx512)");
}

KernelSet choose() {
  if (const char* env = std::getenv("GATEDLM_KERNELS"); env && *env) return parse_or_fail(env);
  KernelSet best = KernelSet::generic;
  for (KernelSet s : kAllSets)
    if (cpu_can_run(s)) best = s;
  return best;
}

std::atomic<int> g_active{-1};

}  // namespace

const char* kernel_set_name(KernelSet set) {
  switch (set) {
    case KernelSet::generic: return "generic";
    case KernelSet::avx2: return "avx2";
    case KernelSet::avx512: return "avx512";
  }
  return "?";
}

bool kernel_set_runnable(KernelSet set) { return cpu_can_run(set); }

std::vector<KernelSet> runnable_kernel_sets() {
  std::vector<KernelSet> out;
  for (KernelSet s : kAllSets)
    if (cpu_can_run(s)) out.push_back(s);
  return out;
}

KernelSet active_kernel_set() {
  int v = g_active.load(std::memory_order_relaxed);
  if (v < 0) {
    v = static_cast<int>(choose());
    g_active.store(v, std::memory_order_relaxed);
  }
  return static_cast<KernelSet>(v);
}

void use_kernel_set(KernelSet set) {
  if (!cpu_can_run(set)) fail("kernel set ", kernel_set_name(set), " cannot run on this CPU");
  g_active.store(static_cast<int>(set), std::memory_order_relaxed);
}

std::string kernel_set_summary() {
#if defined(GATEDLM_SINGLE_KERNEL_SET)
  return "generic, the only set of this build (compiled for the building machine or a non-x86 target)";
#else
  return std::string(kernel_set_name(active_kernel_set())) + " (runnable here: " + runnable_list() + ")";
#endif
}

namespace {

// A switch from the environment: unset or empty gives `fallback`, "0" false, "1" true, any
// other value is an error naming the variable and what 0 does.
bool environment_switch(const char* name, bool fallback, const char* what_0_does) {
  const char* env = std::getenv(name);
  if (!env || !*env) return fallback;
  if (std::string(env) == "0" || std::string(env) == "1") return env[0] == '1';
  fail(name, "=", env, ": expected 0 (", what_0_does, ") or 1");
}

bool cpu_is_intel() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  return __builtin_cpu_is("intel");
#else
  return false;
#endif
}

}  // namespace

bool vnni_allowed() {
  static const bool allowed =
      environment_switch("GATEDLM_VNNI", true, "vpmaddubsw kernels only, as on a CPU without VNNI");
  return allowed;
}

bool far_tile_requests() {
  static const bool far = environment_switch("GATEDLM_FAR_REQUEST", cpu_is_intel(), "near requests only");
  return far;
}

FarTileRequests far_tile_requests_reason() {
  const char* env = std::getenv("GATEDLM_FAR_REQUEST");
  if (env && *env) return FarTileRequests::environment;
  return cpu_is_intel() ? FarTileRequests::intel : FarTileRequests::not_intel;
}

}  // namespace gatedlm::kernels
