#pragma once
// RMSNorm over the last axis: y = x * rsqrt(mean(x^2) + eps) * w, rows of length dim.
// The same weight serves every row, so per-head norms (QK-norm, the SDPA-output norm)
// are this kernel on [tokens * heads, head_dim].
#include <cstdint>

namespace gatedlm::kernels {

// y[rows,dim], rstd[rows] (saved for backward); x may alias y.
template <typename T>
void rmsnorm_forward(T* y, T* rstd, const T* x, const T* w, int64_t rows, int64_t dim, double eps);

// dx[rows,dim] += ..., dw[dim] += ...; x and rstd as saved by the forward.
template <typename T>
void rmsnorm_backward(T* dx, T* dw, const T* dy, const T* x, const T* w, const T* rstd,
                      int64_t rows, int64_t dim);

}  // namespace gatedlm::kernels
