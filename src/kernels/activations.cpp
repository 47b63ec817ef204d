#include "kernels/activations.h"

namespace gatedlm::kernels {

template <typename T>
void activation_forward(T* y, const T* x, int64_t n, Activation a) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = activate(a, x[i]);
}

template <typename T>
void activation_backward(T* dx, const T* dy, const T* x, int64_t n, Activation a) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) dx[i] += dy[i] * activate_grad(a, x[i]);
}

template <typename T>
void swiglu_forward(T* out, const T* g, const T* u, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = g[i] * sigmoid(g[i]) * u[i];
}

template <typename T>
void swiglu_backward(T* dg, T* du, const T* dout, const T* g, const T* u, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    T s = sigmoid(g[i]);
    T silu = g[i] * s;
    dg[i] += dout[i] * u[i] * s * (T(1) + g[i] * (T(1) - s));
    du[i] += dout[i] * silu;
  }
}

#define GATEDLM_INSTANTIATE(T)                                                    \
  template void activation_forward<T>(T*, const T*, int64_t, Activation);         \
  template void activation_backward<T>(T*, const T*, const T*, int64_t, Activation); \
  template void swiglu_forward<T>(T*, const T*, const T*, int64_t);               \
  template void swiglu_backward<T>(T*, T*, const T*, const T*, const T*, int64_t);
GATEDLM_INSTANTIATE(float)
GATEDLM_INSTANTIATE(double)
#undef GATEDLM_INSTANTIATE

}  // namespace gatedlm::kernels
