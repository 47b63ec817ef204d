#include "model/gate.h"

#include <vector>

#include "kernels/activations.h"
#include "kernels/matmul.h"

namespace gatedlm::model {

using kernels::MatmulShape;

GateShape GateShape::of(const ModelConfig& c) {
  return GateShape{c.gate_target_heads(), c.gate_target_head_dim(), c.gate_out(), c.gate_in(),
                   c.d_model, &c.gate};
}

template <typename T>
void gate_forward(T* y_out, T* pre, T* score, const T* y_in, const T* x, const T* w, int64_t n,
                  const GateShape& g) {
  const GateConfig& gc = *g.gate;
  if (gc.input == GateInput::hidden) {
    kernels::matmul(pre, x, w,
                    MatmulShape{.M = n, .N = g.gate_out, .K = g.gate_in, .trans_b = true, .lda = g.d_model});
  } else {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < n; ++r)
      for (int64_t o = 0; o < g.gate_out; ++o) pre[r * g.gate_out + o] = w[o];
  }
  const int64_t H = g.heads, W = g.head_width, size = g.target_size();
  const bool headwise = gc.granularity == GateGranularity::headwise;
  const T inv_heads = T(1) / static_cast<T>(H);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    const T* p = pre + r * g.gate_out;
    T* s = score + r * size;
    if (gc.head_shared) {
      for (int64_t j = 0; j < W; ++j) {
        T mean = 0;
        for (int64_t h = 0; h < H; ++h) mean += kernels::activate(gc.activation, p[h * W + j]);
        mean *= inv_heads;
        for (int64_t h = 0; h < H; ++h) s[h * W + j] = mean;
      }
    } else if (headwise) {
      for (int64_t h = 0; h < H; ++h) {
        T a = kernels::activate(gc.activation, p[h]);
        for (int64_t j = 0; j < W; ++j) s[h * W + j] = a;
      }
    } else {
      for (int64_t e = 0; e < size; ++e) s[e] = kernels::activate(gc.activation, p[e]);
    }
    const T* yi = y_in + r * size;
    T* yo = y_out + r * size;
    if (gc.combine == GateCombine::multiply)
      for (int64_t e = 0; e < size; ++e) yo[e] = yi[e] * s[e];
    else
      for (int64_t e = 0; e < size; ++e) yo[e] = yi[e] + s[e];
  }
}

template <typename T>
void gate_backward(T* dy_in, T* dx, T* dw, T* scratch, const T* dy_out, const T* y_in, const T* pre,
                   const T* score, const T* x, const T* w, int64_t n, const GateShape& g) {
  const GateConfig& gc = *g.gate;
  const int64_t H = g.heads, W = g.head_width, size = g.target_size();
  const bool multiply = gc.combine == GateCombine::multiply;
  const bool headwise = gc.granularity == GateGranularity::headwise;
  const T inv_heads = T(1) / static_cast<T>(H);
  // scratch[r, o] = d loss / d pre[r, o]
#pragma omp parallel
  {
    std::vector<T> dscore(size);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < n; ++r) {
      const T* dyo = dy_out + r * size;
      const T* yi = y_in + r * size;
      const T* s = score + r * size;
      T* dyi = dy_in + r * size;
      for (int64_t e = 0; e < size; ++e) {
        dscore[e] = multiply ? dyo[e] * yi[e] : dyo[e];
        dyi[e] += multiply ? dyo[e] * s[e] : dyo[e];
      }
      const T* p = pre + r * g.gate_out;
      T* dp = scratch + r * g.gate_out;
      if (gc.head_shared) {
        for (int64_t j = 0; j < W; ++j) {
          T sum = 0;
          for (int64_t h = 0; h < H; ++h) sum += dscore[h * W + j];
          for (int64_t h = 0; h < H; ++h)
            dp[h * W + j] = sum * inv_heads * kernels::activate_grad(gc.activation, p[h * W + j]);
        }
      } else if (headwise) {
        for (int64_t h = 0; h < H; ++h) {
          T sum = 0;
          for (int64_t j = 0; j < W; ++j) sum += dscore[h * W + j];
          dp[h] = sum * kernels::activate_grad(gc.activation, p[h]);
        }
      } else {
        for (int64_t e = 0; e < size; ++e) dp[e] = dscore[e] * kernels::activate_grad(gc.activation, p[e]);
      }
    }
  }
  if (gc.input == GateInput::hidden) {
    // dW[out, in] += dpre^T x[:, :in];  dx[:, :in] += dpre W
    kernels::matmul(dw, scratch, x,
                    MatmulShape{.M = g.gate_out, .N = g.gate_in, .K = n, .trans_a = true, .ldb = g.d_model,
                                .accumulate = true});
    kernels::matmul(dx, scratch, w,
                    MatmulShape{.M = n, .N = g.gate_in, .K = g.gate_out, .ldc = g.d_model, .accumulate = true});
  } else {
    for (int64_t r = 0; r < n; ++r)
      for (int64_t o = 0; o < g.gate_out; ++o) dw[o] += scratch[r * g.gate_out + o];
  }
}

template void gate_forward<float>(float*, float*, float*, const float*, const float*, const float*, int64_t,
                                  const GateShape&);
template void gate_forward<double>(double*, double*, double*, const double*, const double*, const double*,
                                   int64_t, const GateShape&);
template void gate_backward<float>(float*, float*, float*, float*, const float*, const float*, const float*,
                                   const float*, const float*, const float*, int64_t, const GateShape&);
template void gate_backward<double>(double*, double*, double*, double*, const double*, const double*,
                                    const double*, const double*, const double*, const double*, int64_t,
                                    const GateShape&);

}  // namespace gatedlm::model
