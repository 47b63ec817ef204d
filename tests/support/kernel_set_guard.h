#pragma once
// Runs the products in one kernel set for the guard's life (the active one after): the
// generic set keeps fp32 numerics in every product on blocks, for exact comparisons.
#include "kernels/kernel_set.h"

namespace gatedlm::testing {

class KernelSetGuard {
 public:
  explicit KernelSetGuard(kernels::KernelSet set) : previous_(kernels::active_kernel_set()) {
    kernels::use_kernel_set(set);
  }
  ~KernelSetGuard() { kernels::use_kernel_set(previous_); }
  KernelSetGuard(const KernelSetGuard&) = delete;
  KernelSetGuard& operator=(const KernelSetGuard&) = delete;

 private:
  kernels::KernelSet previous_;
};

}  // namespace gatedlm::testing
