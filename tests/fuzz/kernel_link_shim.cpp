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

// analysis/expert_load.cpp (the report's expert-load table, which report_analysis reaches)
// also holds the probe that reads a live model's counts: no harness has a model.
#include "model/model.h"

namespace gatedlm::model {

template <>
std::vector<int64_t> Model<float>::expert_counts() const {
  std::fprintf(stderr, "Model::expert_counts is not part of the fuzz harnesses (tests/fuzz/kernel_link_shim.cpp)\n");
  std::abort();
}

}  // namespace gatedlm::model

// model/switch_heads.cpp (its tensor names, which the config checks use) also holds the
// switch-heads forward and backward passes, which call the matmuls: no harness runs them.
#include "kernels/matmul.h"

namespace gatedlm::kernels {

namespace {
[[noreturn]] void not_in_fuzz_harness(const char* what) {
  std::fprintf(stderr, "%s is not part of the fuzz harnesses (tests/fuzz/kernel_link_shim.cpp)\n", what);
  std::abort();
}
}  // namespace

template <typename T>
void matmul(T*, const T*, const T*, MatmulShape) {
  not_in_fuzz_harness("matmul");
}
template <typename T>
void linear_forward(T*, const T*, const T*, int64_t, int64_t, int64_t) {
  not_in_fuzz_harness("linear_forward");
}
template <typename T>
void linear_backward(T*, T*, const T*, const T*, const T*, int64_t, int64_t, int64_t, bool) {
  not_in_fuzz_harness("linear_backward");
}
// kernels/quant_blocks.cpp (GGUF's Q8_0 / Q4_0 blocks, which the gguf harness dequantises)
// rounds to BF16 through the per-set to_bf16 when it quantises: no harness quantises.
void to_bf16(uint16_t*, const float*, int64_t) { not_in_fuzz_harness("to_bf16"); }
template void matmul<float>(float*, const float*, const float*, MatmulShape);
template void matmul<double>(double*, const double*, const double*, MatmulShape);
template void linear_forward<float>(float*, const float*, const float*, int64_t, int64_t, int64_t);
template void linear_forward<double>(double*, const double*, const double*, int64_t, int64_t, int64_t);
template void linear_backward<float>(float*, float*, const float*, const float*, const float*, int64_t, int64_t,
                                     int64_t, bool);
template void linear_backward<double>(double*, double*, const double*, const double*, const double*, int64_t,
                                      int64_t, int64_t, bool);

}  // namespace gatedlm::kernels
