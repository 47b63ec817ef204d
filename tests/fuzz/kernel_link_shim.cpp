// The fuzz harnesses link the parsing layers only (CMakeLists.txt beside this file), not
// the kernels compiled once per kernel set. rope.cpp, needed for the RoPE tables that a
// config check builds, also holds rope_apply_rows, which calls the per-set rope_apply: no
// harness applies RoPE, so this definition is only for the linker and aborts if reached.
#include <cstdio>
#include <cstdlib>

#include "kernels/rope.h"

namespace gatedlm::kernels {

template <typename T>
void rope_apply(T*, const RopeTable&, int64_t, int64_t, int64_t, int64_t, int64_t, bool) {
  std::fprintf(stderr, "rope_apply is not part of the fuzz harnesses (tests/fuzz/kernel_link_shim.cpp)\n");
  std::abort();
}

template void rope_apply<float>(float*, const RopeTable&, int64_t, int64_t, int64_t, int64_t, int64_t, bool);
template void rope_apply<double>(double*, const RopeTable&, int64_t, int64_t, int64_t, int64_t, int64_t, bool);

}  // namespace gatedlm::kernels
