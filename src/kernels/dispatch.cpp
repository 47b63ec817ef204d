// The public kernel functions: each forwards to the active kernel set's (kernel_set.h).
// The switch costs a load and a branch per call, nothing beside a kernel's work.
#include "kernels/kernel_set.h"
#include "kernels/kernel_sets.h"
#include "kernels/bf16_support.h"
#include "kernels/delta_rule_step.h"
#include "kernels/half_float.h"
#include "kernels/matmul.h"
#include "kernels/quant_matmul_sets.h"

namespace gatedlm::kernels {

#if GATEDLM_X86_KERNEL_SETS
#define GATEDLM_DISPATCH(call)                               \
  switch (active_kernel_set()) {                             \
    case KernelSet::avx512: return avx512::call;             \
    case KernelSet::avx2: return avx2::call;                 \
    case KernelSet::generic: break;                          \
  }                                                          \
  return generic::call
#else
#define GATEDLM_DISPATCH(call) return generic::call
#endif

template <typename T>
void activation_forward(T* y, const T* x, int64_t n, Activation a) {
  GATEDLM_DISPATCH(activation_forward<T>(y, x, n, a));
}
template <typename T>
void activation_backward(T* dx, const T* dy, const T* x, int64_t n, Activation a) {
  GATEDLM_DISPATCH(activation_backward<T>(dx, dy, x, n, a));
}
template <typename T>
void activate_row(T* y, const T* x, int64_t n, Activation a) {
  GATEDLM_DISPATCH(activate_row<T>(y, x, n, a));
}
template <typename T>
void activate_grad_row(T* dx, const T* dy, const T* x, int64_t n, Activation a) {
  GATEDLM_DISPATCH(activate_grad_row<T>(dx, dy, x, n, a));
}
template <typename T>
void swiglu_forward(T* out, const T* gu, int64_t rows, int64_t f) {
  GATEDLM_DISPATCH(swiglu_forward<T>(out, gu, rows, f));
}
template <typename T>
void swiglu_backward(T* dgu, const T* dout, const T* gu, int64_t rows, int64_t f) {
  GATEDLM_DISPATCH(swiglu_backward<T>(dgu, dout, gu, rows, f));
}
template <typename T>
void adamw_update(T* param, T* m, T* v, const T* grad, int64_t n, const AdamWParams& hp) {
  GATEDLM_DISPATCH(adamw_update<T>(param, m, v, grad, n, hp));
}
template <typename T>
double cross_entropy(T* losses, T* dlogits, const T* logits, const int32_t* targets, int64_t rows, int64_t vocab,
                     T grad_scale) {
  GATEDLM_DISPATCH(cross_entropy<T>(losses, dlogits, logits, targets, rows, vocab, grad_scale));
}
template <typename T>
void cross_entropy_backward(T* dlogits, const T* logits, const T* losses, const int32_t* targets, int64_t rows,
                            int64_t vocab, T grad_scale) {
  GATEDLM_DISPATCH(cross_entropy_backward<T>(dlogits, logits, losses, targets, rows, vocab, grad_scale));
}
template <typename T>
void delta_rule_step(T* S, T* o, const T* q, const T* k, const T* v, T g, T beta, int64_t dk, int64_t dv, T* u) {
  GATEDLM_DISPATCH(delta_rule_step<T>(S, o, q, k, v, g, beta, dk, dv, u));
}
template <typename T>
void rmsnorm_forward(T* y, T* rstd, const T* x, const T* w, int64_t rows, int64_t dim, double eps) {
  GATEDLM_DISPATCH(rmsnorm_forward<T>(y, rstd, x, w, rows, dim, eps));
}
template <typename T>
void rmsnorm_backward(T* dx, T* dw, const T* dy, const T* x, const T* w, const T* rstd, int64_t rows, int64_t dim) {
  GATEDLM_DISPATCH(rmsnorm_backward<T>(dx, dw, dy, x, w, rstd, rows, dim));
}
template <typename T>
void rope_apply(T* x, const RopeTable& table, int64_t batch, int64_t seq, int64_t heads, int64_t head_dim,
                int64_t pos0, bool inverse) {
  GATEDLM_DISPATCH(rope_apply<T>(x, table, batch, seq, heads, head_dim, pos0, inverse));
}

template <>
void attention_forward<float>(float* out, float* lse, const float* q, const float* k, const float* v,
                              const AttentionShape& s, const float* gate_score, float* gated_out) {
  GATEDLM_DISPATCH(attention_forward_f32(out, lse, q, k, v, s, gate_score, gated_out));
}
template <>
void attention_backward<float>(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                               const float* v, const float* out, const float* lse, const AttentionShape& s,
                               const float* gate_score, float* dgate_score, GateGradLayout dgate_layout) {
  GATEDLM_DISPATCH(attention_backward_f32(dq, dk, dv, dout, q, k, v, out, lse, s, gate_score, dgate_score, dgate_layout));
}
template <>
void attention_decode<float>(std::span<const DecodeQuery<float>> queries, const DecodeShape& s) {
  GATEDLM_DISPATCH(attention_decode_f32(queries, s));
}
template <>
void attention_decode<float, uint16_t>(std::span<const DecodeQuery<float, uint16_t>> queries, const DecodeShape& s) {
  GATEDLM_DISPATCH(attention_decode_f32(queries, s));
}
template <>
void attention_decode<float, BlockQ8_0>(std::span<const DecodeQuery<float, BlockQ8_0>> queries, const DecodeShape& s) {
  GATEDLM_DISPATCH(attention_decode_f32(queries, s));
}

void to_bf16(uint16_t* out, const float* in, int64_t n) { GATEDLM_DISPATCH(to_bf16(out, in, n)); }
void round_to_bf16(float* out, const float* in, int64_t n) { GATEDLM_DISPATCH(round_to_bf16(out, in, n)); }
void to_f16(uint16_t* out, const float* in, int64_t n) { GATEDLM_DISPATCH(to_f16(out, in, n)); }
void from_f16(float* out, const uint16_t* in, int64_t n) { GATEDLM_DISPATCH(from_f16(out, in, n)); }
void skinny_matmul_f32(float* C, int64_t ldc, const float* A, int64_t lda, const float* B, int64_t ldb, int64_t M,
                       int64_t N, int64_t K, bool accumulate) {
  GATEDLM_DISPATCH(skinny_matmul_f32(C, ldc, A, lda, B, ldb, M, N, K, accumulate));
}
bool panel_matmul_pays() { GATEDLM_DISPATCH(panel_matmul_pays()); }
void panel_matmul_f32(float* C, int64_t ldc, const float* A, int64_t lda, const float* panels, int64_t M, int64_t N,
                      int64_t K, bool accumulate) {
  GATEDLM_DISPATCH(panel_matmul_f32(C, ldc, A, lda, panels, M, N, K, accumulate));
}
bool quant_path_runnable(QuantPath path, ElementType format) { GATEDLM_DISPATCH(quant_path_runnable(path, format)); }
bool quant_path_reads_tiles(QuantPath path, ElementType format) {
  GATEDLM_DISPATCH(quant_path_reads_tiles(path, format));
}
QuantPath quant_best_path(ElementType format, int64_t m) { GATEDLM_DISPATCH(quant_best_path(format, m)); }
void quant_matmul_path_of_set(QuantPath path, float* C, int64_t ldc, const float* A, int64_t lda, int64_t m,
                              const QuantWeights& W, bool accumulate) {
  GATEDLM_DISPATCH(quant_matmul_path(path, C, ldc, A, lda, m, W, accumulate));
}
void quant_dequantize_rows_of_set(float* out, const QuantWeights& W, int64_t row0, int64_t rows) {
  GATEDLM_DISPATCH(quant_dequantize_rows(out, W, row0, rows));
}

#undef GATEDLM_DISPATCH

#define GATEDLM_INSTANTIATE(T)                                                                                  \
  template void activation_forward<T>(T*, const T*, int64_t, Activation);                                      \
  template void activation_backward<T>(T*, const T*, const T*, int64_t, Activation);                           \
  template void activate_row<T>(T*, const T*, int64_t, Activation);                                            \
  template void activate_grad_row<T>(T*, const T*, const T*, int64_t, Activation);                             \
  template void swiglu_forward<T>(T*, const T*, int64_t, int64_t);                                             \
  template void swiglu_backward<T>(T*, const T*, const T*, int64_t, int64_t);                                  \
  template void adamw_update<T>(T*, T*, T*, const T*, int64_t, const AdamWParams&);                            \
  template double cross_entropy<T>(T*, T*, const T*, const int32_t*, int64_t, int64_t, T);                     \
  template void cross_entropy_backward<T>(T*, const T*, const T*, const int32_t*, int64_t, int64_t, T);        \
  template void delta_rule_step<T>(T*, T*, const T*, const T*, const T*, T, T, int64_t, int64_t, T*);          \
  template void rmsnorm_forward<T>(T*, T*, const T*, const T*, int64_t, int64_t, double);                      \
  template void rmsnorm_backward<T>(T*, T*, const T*, const T*, const T*, const T*, int64_t, int64_t);         \
  template void rope_apply<T>(T*, const RopeTable&, int64_t, int64_t, int64_t, int64_t, int64_t, bool);
GATEDLM_INSTANTIATE(float)
GATEDLM_INSTANTIATE(double)
#undef GATEDLM_INSTANTIATE

}  // namespace gatedlm::kernels
