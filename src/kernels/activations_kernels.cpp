#include "kernels/activations.h"

#include <algorithm>
#include "kernels/kernel_sets.h"
#include "kernels/parallel_work.h"

#include "kernels/kernel_set_begin.h"
#include "kernels/fast_math.h"

namespace gatedlm::kernels::GATEDLM_KSET {

namespace {

// One row of SwiGLU and its gradient, n elements. float runs on AVX-512 or AVX2 in those
// kernel sets (libm's expf would be a call per element); double is the reference.
template <typename T>
struct SwiGluRow {
  static void forward(T* out, const T* g, const T* u, int64_t n) { tail_forward(out, g, u, n); }
  static void backward(T* dg, T* du, const T* dout, const T* g, const T* u, int64_t n) {
    tail_backward(dg, du, dout, g, u, n);
  }
  // The scalar definitions, for any element type (the vector rows' last elements too).
  template <typename F>
  static void tail_forward(F* out, const F* g, const F* u, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = g[i] * sigmoid(g[i]) * u[i];
  }
  template <typename F>
  static void tail_backward(F* dg, F* du, const F* dout, const F* g, const F* u, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      const F s = sigmoid(g[i]);
      dg[i] = dout[i] * u[i] * s * (F(1) + g[i] * (F(1) - s));
      du[i] = dout[i] * g[i] * s;
    }
  }
};

#if GATEDLM_KSET_AVX512
template <>
struct SwiGluRow<float> {
  static __m512 sigmoid16(__m512 x) {
    const __m512 one = _mm512_set1_ps(1.0f);
    return _mm512_div_ps(one, _mm512_add_ps(one, exp_approx16(_mm512_sub_ps(_mm512_setzero_ps(), x))));
  }
  static void forward(float* out, const float* g, const float* u, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 k = tail_mask(n - i);
      const __m512 gv = _mm512_maskz_loadu_ps(k, g + i);
      _mm512_mask_storeu_ps(out + i, k, _mm512_mul_ps(_mm512_mul_ps(gv, sigmoid16(gv)), _mm512_maskz_loadu_ps(k, u + i)));
    }
  }
  static void backward(float* dg, float* du, const float* dout, const float* g, const float* u, int64_t n) {
    const __m512 one = _mm512_set1_ps(1.0f);
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 k = tail_mask(n - i);
      const __m512 gv = _mm512_maskz_loadu_ps(k, g + i), uv = _mm512_maskz_loadu_ps(k, u + i);
      const __m512 dv = _mm512_maskz_loadu_ps(k, dout + i), s = sigmoid16(gv);
      // silu'(g) = s * (1 + g * (1 - s))
      const __m512 dsilu = _mm512_mul_ps(s, _mm512_fmadd_ps(gv, _mm512_sub_ps(one, s), one));
      _mm512_mask_storeu_ps(dg + i, k, _mm512_mul_ps(_mm512_mul_ps(dv, uv), dsilu));
      _mm512_mask_storeu_ps(du + i, k, _mm512_mul_ps(dv, _mm512_mul_ps(gv, s)));
    }
  }
};
#elif GATEDLM_KSET_AVX2
template <>
struct SwiGluRow<float> {
  static __m256 sigmoid8(__m256 x) {
    const __m256 one = _mm256_set1_ps(1.0f);
    return _mm256_div_ps(one, _mm256_add_ps(one, exp_approx8(_mm256_sub_ps(_mm256_setzero_ps(), x))));
  }
  static void forward(float* out, const float* g, const float* u, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const __m256 gv = _mm256_loadu_ps(g + i);
      _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(gv, sigmoid8(gv)), _mm256_loadu_ps(u + i)));
    }
    SwiGluRow<double>::tail_forward(out + i, g + i, u + i, n - i);
  }
  static void backward(float* dg, float* du, const float* dout, const float* g, const float* u, int64_t n) {
    const __m256 one = _mm256_set1_ps(1.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const __m256 gv = _mm256_loadu_ps(g + i), uv = _mm256_loadu_ps(u + i), dv = _mm256_loadu_ps(dout + i);
      const __m256 s = sigmoid8(gv);
      const __m256 dsilu = _mm256_mul_ps(s, _mm256_fmadd_ps(gv, _mm256_sub_ps(one, s), one));  // silu'(g)
      _mm256_storeu_ps(dg + i, _mm256_mul_ps(_mm256_mul_ps(dv, uv), dsilu));
      _mm256_storeu_ps(du + i, _mm256_mul_ps(dv, _mm256_mul_ps(gv, s)));
    }
    SwiGluRow<double>::tail_backward(dg + i, du + i, dout + i, g + i, u + i, n - i);
  }
};
#endif

// act(x) and dy * act'(x) on a row: the scalar definitions of activations.h, with the
// sigmoid family on 16 (AVX-512) or 8 (AVX2) lanes for float in those kernel sets.
template <typename T>
struct ActivationRow {
  static void forward(T* y, const T* x, int64_t n, Activation a) {
    for (int64_t i = 0; i < n; ++i) y[i] = activate(a, x[i]);
  }
  static void backward(T* dx, const T* dy, const T* x, int64_t n, Activation a) {
    for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * activate_grad(a, x[i]);
  }
};

#if GATEDLM_KSET_AVX512
template <>
struct ActivationRow<float> {
  // act(x) and act'(x) from s = sigmoid(x), per activations.h.
  static void act_and_grad(__m512 x, Activation a, __m512& act, __m512& grad) {
    const __m512 one = _mm512_set1_ps(1.0f), half = _mm512_set1_ps(0.5f);
    const __m512 s = SwiGluRow<float>::sigmoid16(x), ds = _mm512_mul_ps(s, _mm512_sub_ps(one, s));
    act = x;
    grad = one;
    switch (a) {
      case Activation::sigmoid: act = s; grad = ds; return;
      case Activation::silu: act = _mm512_mul_ps(x, s); grad = _mm512_fmadd_ps(x, ds, s); return;
      case Activation::ns_sigmoid: act = _mm512_fmadd_ps(half, s, half); grad = _mm512_mul_ps(half, ds); return;
      case Activation::identity: return;
    }
  }
  static void forward(float* y, const float* x, int64_t n, Activation a) {
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 k = tail_mask(n - i);
      __m512 act, grad;
      act_and_grad(_mm512_maskz_loadu_ps(k, x + i), a, act, grad);
      _mm512_mask_storeu_ps(y + i, k, act);
    }
  }
  static void backward(float* dx, const float* dy, const float* x, int64_t n, Activation a) {
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 k = tail_mask(n - i);
      __m512 act, grad;
      act_and_grad(_mm512_maskz_loadu_ps(k, x + i), a, act, grad);
      _mm512_mask_storeu_ps(dx + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, dy + i), grad));
    }
  }
};
#elif GATEDLM_KSET_AVX2
template <>
struct ActivationRow<float> {
  // act(x) and act'(x) from s = sigmoid(x), per activations.h.
  static void act_and_grad(__m256 x, Activation a, __m256& act, __m256& grad) {
    const __m256 one = _mm256_set1_ps(1.0f), half = _mm256_set1_ps(0.5f);
    const __m256 s = SwiGluRow<float>::sigmoid8(x), ds = _mm256_mul_ps(s, _mm256_sub_ps(one, s));
    act = x;
    grad = one;
    switch (a) {
      case Activation::sigmoid: act = s; grad = ds; return;
      case Activation::silu: act = _mm256_mul_ps(x, s); grad = _mm256_fmadd_ps(x, ds, s); return;
      case Activation::ns_sigmoid: act = _mm256_fmadd_ps(half, s, half); grad = _mm256_mul_ps(half, ds); return;
      case Activation::identity: return;
    }
  }
  static void forward(float* y, const float* x, int64_t n, Activation a) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      __m256 act, grad;
      act_and_grad(_mm256_loadu_ps(x + i), a, act, grad);
      _mm256_storeu_ps(y + i, act);
    }
    for (; i < n; ++i) y[i] = activate(a, x[i]);
  }
  static void backward(float* dx, const float* dy, const float* x, int64_t n, Activation a) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      __m256 act, grad;
      act_and_grad(_mm256_loadu_ps(x + i), a, act, grad);
      _mm256_storeu_ps(dx + i, _mm256_mul_ps(_mm256_loadu_ps(dy + i), grad));
    }
    for (; i < n; ++i) dx[i] = dy[i] * activate_grad(a, x[i]);
  }
};
#endif

}  // namespace

template <typename T>
void activate_row(T* y, const T* x, int64_t n, Activation a) {
  ActivationRow<T>::forward(y, x, n, a);
}
template <typename T>
void activate_grad_row(T* dx, const T* dy, const T* x, int64_t n, Activation a) {
  ActivationRow<T>::backward(dx, dy, x, n, a);
}

template <typename T>
void activation_forward(T* y, const T* x, int64_t n, Activation a) {
  constexpr int64_t kPiece = 4096;  // values a loop iteration: pieces, not rows, are the unit shared
#pragma omp parallel for schedule(static) if (rows_in_parallel((n + kPiece - 1) / kPiece, kPiece))
  for (int64_t i = 0; i < n; i += kPiece) ActivationRow<T>::forward(y + i, x + i, std::min(kPiece, n - i), a);
}

template <typename T>
void activation_backward(T* dx, const T* dy, const T* x, int64_t n, Activation a) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) dx[i] += dy[i] * activate_grad(a, x[i]);
}

template <typename T>
void swiglu_forward(T* out, const T* gu, int64_t rows, int64_t f) {
#pragma omp parallel for schedule(static) if (rows_in_parallel(rows, f))
  for (int64_t r = 0; r < rows; ++r) SwiGluRow<T>::forward(out + r * f, gu + r * 2 * f, gu + r * 2 * f + f, f);
}

template <typename T>
void swiglu_backward(T* dgu, const T* dout, const T* gu, int64_t rows, int64_t f) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T* g = gu + r * 2 * f;
    T* dg = dgu + r * 2 * f;
    SwiGluRow<T>::backward(dg, dg + f, dout + r * f, g, g + f, f);
  }
}

#define GATEDLM_INSTANTIATE(T)                                                    \
  template void activation_forward<T>(T*, const T*, int64_t, Activation);         \
  template void activation_backward<T>(T*, const T*, const T*, int64_t, Activation); \
  template void activate_row<T>(T*, const T*, int64_t, Activation);               \
  template void activate_grad_row<T>(T*, const T*, const T*, int64_t, Activation);  \
  template void swiglu_forward<T>(T*, const T*, int64_t, int64_t);               \
  template void swiglu_backward<T>(T*, const T*, const T*, int64_t, int64_t);
GATEDLM_INSTANTIATE(float)
GATEDLM_INSTANTIATE(double)
#undef GATEDLM_INSTANTIATE

}  // namespace gatedlm::kernels::GATEDLM_KSET

#include "kernels/kernel_set_end.h"
