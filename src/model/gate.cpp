#include "model/gate.h"

#include "kernels/activations.h"
#include "kernels/matmul.h"
#include "kernels/parallel_work.h"

namespace gatedlm::model {

using kernels::MatmulShape;

GateShape GateShape::of(const ModelConfig& c) {
  return GateShape{c.gate_target_heads(), c.gate_target_head_dim(), c.gate_out(), c.gate_in(),
                   c.d_model, &c.gate};
}

template <typename T>
void gate_project(T* pre, const T* x, const kernels::Weight<T>& w, int64_t n, const GateShape& g) {
  if (g.gate->input == GateInput::hidden) {
    kernels::matmul(pre, x, w,
                    MatmulShape{.M = n, .N = g.gate_out, .K = g.gate_in, .trans_b = true, .lda = g.d_model});
    return;
  }
#pragma omp parallel for schedule(static) if (kernels::rows_in_parallel(n, g.gate_out))
  for (int64_t r = 0; r < n; ++r)
    for (int64_t o = 0; o < g.gate_out; ++o) pre[r * g.gate_out + o] = w.values[o];
}

template <typename T>
void gate_project_backward(T* dx, T* dw, const T* dpre, const T* x, const T* w, int64_t n, const GateShape& g) {
  if (g.gate->input == GateInput::hidden) {
    // dW[out, in] += dpre^T x[:, :in];  dx[:, :in] += dpre W
    kernels::matmul(dw, dpre, x,
                    MatmulShape{.M = g.gate_out, .N = g.gate_in, .K = n, .trans_a = true, .ldb = g.d_model,
                                .accumulate = true});
    kernels::matmul(dx, dpre, w,
                    MatmulShape{.M = n, .N = g.gate_in, .K = g.gate_out, .ldc = g.d_model, .accumulate = true});
    return;
  }
  for (int64_t r = 0; r < n; ++r)
    for (int64_t o = 0; o < g.gate_out; ++o) dw[o] += dpre[r * g.gate_out + o];
}

template <typename T>
void gate_scores(T* score, const T* pre, int64_t ld_pre, int64_t n, const GateShape& g) {
  const GateConfig& gc = *g.gate;
  const int64_t H = g.heads, W = g.head_width, size = g.target_size();
  const T inv_heads = T(1) / static_cast<T>(H);
#pragma omp parallel for schedule(static) if (kernels::rows_in_parallel(n, size))
  for (int64_t r = 0; r < n; ++r) {
    const T* p = pre + r * ld_pre;
    T* s = score + r * size;
    if (gc.head_shared) {
      for (int64_t j = 0; j < W; ++j) {
        T mean = 0;
        for (int64_t h = 0; h < H; ++h) mean += kernels::activate(gc.activation, p[h * W + j]);
        mean *= inv_heads;
        for (int64_t h = 0; h < H; ++h) s[h * W + j] = mean;
      }
    } else if (gc.granularity == GateGranularity::headwise) {
      for (int64_t h = 0; h < H; ++h) {
        const T a = kernels::activate(gc.activation, p[h]);
        for (int64_t j = 0; j < W; ++j) s[h * W + j] = a;
      }
    } else {
      kernels::activate_row(s, p, size, gc.activation);
    }
  }
}

template <typename T>
void gate_forward(T* y_out, T* score, const T* y_in, const T* pre, int64_t ld_pre, int64_t n, const GateShape& g) {
  gate_scores(score, pre, ld_pre, n, g);
  const int64_t total = n * g.target_size();
  if (g.gate->combine == GateCombine::multiply) {
#pragma omp parallel for simd schedule(static) if (kernels::elementwise_in_parallel(total))
    for (int64_t e = 0; e < total; ++e) y_out[e] = y_in[e] * score[e];
  } else {
#pragma omp parallel for simd schedule(static) if (kernels::elementwise_in_parallel(total))
    for (int64_t e = 0; e < total; ++e) y_out[e] = y_in[e] + score[e];
  }
}

bool gate_grad_from_score(const GateShape& g) {
  return !g.gate->head_shared && kernels::grad_from_output_known(g.gate->activation);
}

template <typename T>
void gate_scores_backward(T* dpre, int64_t ld_dpre, const T* dscore, const T* pre, int64_t ld_pre, const T* score,
                          int64_t n, const GateShape& g) {
  const GateConfig& gc = *g.gate;
  const int64_t H = g.heads, W = g.head_width, size = g.target_size();
  const T inv_heads = T(1) / static_cast<T>(H);
  const bool from_score = gate_grad_from_score(g);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    const T* ds = dscore + r * size;
    const T* sc = score + r * size;
    const T* p = from_score ? nullptr : pre + r * ld_pre;
    T* dp = dpre + r * ld_dpre;
    if (gc.head_shared) {
      for (int64_t j = 0; j < W; ++j) {
        T sum = 0;
        for (int64_t h = 0; h < H; ++h) sum += ds[h * W + j];
        for (int64_t h = 0; h < H; ++h)
          dp[h * W + j] = sum * inv_heads * kernels::activate_grad(gc.activation, p[h * W + j]);
      }
    } else if (gc.granularity == GateGranularity::headwise) {
      for (int64_t h = 0; h < H; ++h) {
        T sum = 0;
        for (int64_t j = 0; j < W; ++j) sum += ds[h * W + j];
        dp[h] = sum * (from_score ? kernels::activate_grad_from_output(gc.activation, sc[h * W])
                                  : kernels::activate_grad(gc.activation, p[h]));
      }
    } else if (from_score) {
#pragma omp simd
      for (int64_t e = 0; e < size; ++e) dp[e] = ds[e] * kernels::activate_grad_from_output(gc.activation, sc[e]);
    } else {
      kernels::activate_grad_row(dp, ds, p, size, gc.activation);
    }
  }
}

template <typename T>
void gate_backward(T* dy_in, T* dpre, int64_t ld_dpre, T* scratch, const T* dy_out, const T* y_in, const T* pre,
                   int64_t ld_pre, const T* score, int64_t n, const GateShape& g) {
  const int64_t total = n * g.target_size();
  if (g.gate->combine == GateCombine::multiply) {
#pragma omp parallel for simd schedule(static)
    for (int64_t e = 0; e < total; ++e) {
      scratch[e] = dy_out[e] * y_in[e];
      dy_in[e] += dy_out[e] * score[e];
    }
  } else {
#pragma omp parallel for simd schedule(static)
    for (int64_t e = 0; e < total; ++e) {
      scratch[e] = dy_out[e];
      dy_in[e] += dy_out[e];
    }
  }
  gate_scores_backward(dpre, ld_dpre, scratch, pre, ld_pre, score, n, g);
}

#define GATEDLM_INSTANTIATE(T)                                                                             \
  template void gate_project<T>(T*, const T*, const kernels::Weight<T>&, int64_t, const GateShape&);         \
  template void gate_project_backward<T>(T*, T*, const T*, const T*, const T*, int64_t, const GateShape&); \
  template void gate_scores<T>(T*, const T*, int64_t, int64_t, const GateShape&);                          \
  template void gate_forward<T>(T*, T*, const T*, const T*, int64_t, int64_t, const GateShape&);           \
  template void gate_scores_backward<T>(T*, int64_t, const T*, const T*, int64_t, const T*, int64_t,       \
                                        const GateShape&);                                                 \
  template void gate_backward<T>(T*, T*, int64_t, T*, const T*, const T*, const T*, int64_t, const T*, int64_t, \
                                 const GateShape&);
GATEDLM_INSTANTIATE(float)
GATEDLM_INSTANTIATE(double)
#undef GATEDLM_INSTANTIATE

}  // namespace gatedlm::model
