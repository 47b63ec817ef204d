// The float attention kernels: blocked like FlashAttention-2 so that the inner loops are
// small matrix products that vectorise (AVX-512 where the build targets it), with the
// online softmax kept per query row. attention.cpp holds the simple reference versions,
// used for double precision and as the test oracle.
//
// Block sizes: a query block of kBq rows and a key block of kBk columns. With head_dim
// 64 the working set (Q, K^T, V blocks, scores, output accumulator) is about 56 KiB:
// L1-resident for the score tile, L2 for the rest.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/attention.h"
#include "kernels/fast_math.h"

namespace gatedlm::kernels {
namespace {

constexpr int64_t kBq = 32;
constexpr int64_t kBk = 64;

// out[r, j] = sum_d a[r, d] * bt[d, j]  for r < rows, j < cols (bt is [D, ldb]).
inline void tile_abt(float* out, const float* a, const float* bt, int64_t rows, int64_t cols, int64_t D,
                     int64_t ldb) {
  for (int64_t r = 0; r < rows; ++r) {
    float* o = out + r * kBk;
    for (int64_t j = 0; j < cols; ++j) o[j] = 0.0f;
    const float* ar = a + r * D;
    for (int64_t d = 0; d < D; ++d) {
      const float s = ar[d];
      const float* b = bt + d * ldb;
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) o[j] += s * b[j];
    }
  }
}

// acc[r, d] += sum_j p[r, j] * v[j, d]  (p rows of stride kBk, v rows of stride D).
inline void tile_pv(float* acc, const float* p, const float* v, int64_t rows, int64_t cols, int64_t D) {
  for (int64_t r = 0; r < rows; ++r) {
    float* a = acc + r * D;
    const float* pr = p + r * kBk;
    for (int64_t j = 0; j < cols; ++j) {
      const float w = pr[j];
      if (w == 0.0f) continue;
      const float* vj = v + j * D;
#pragma omp simd
      for (int64_t d = 0; d < D; ++d) a[d] += w * vj[d];
    }
  }
}

}  // namespace

template <>
void attention_forward<float>(float* out, float* lse, const float* q, const float* k, const float* v,
                              const AttentionShape& s) {
  const int64_t D = s.head_dim, group = s.n_q / s.n_kv, S = s.seq;
  const int64_t q_blocks = (S + kBq - 1) / kBq;
  const float scale = static_cast<float>(s.scale);
  const float neg_inf = -std::numeric_limits<float>::infinity();
#pragma omp parallel
  {
    std::vector<float> qb(kBq * D), kt(D * kBk), vb(kBk * D), sc(kBq * kBk), acc(kBq * D), m(kBq), l(kBq);
#pragma omp for collapse(3) schedule(dynamic, 1)
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t h = 0; h < s.n_q; ++h)
        for (int64_t blk = q_blocks - 1; blk >= 0; --blk) {  // longest rows first
          const int64_t g = h / group, t0 = blk * kBq, rows = std::min(kBq, S - t0);
          for (int64_t r = 0; r < rows; ++r) {
            const float* src = q + ((b * S + t0 + r) * s.n_q + h) * D;
            for (int64_t d = 0; d < D; ++d) qb[r * D + d] = src[d] * scale;
            m[r] = neg_inf;
            l[r] = 0.0f;
          }
          std::fill(acc.begin(), acc.end(), 0.0f);
          const int64_t key_end = t0 + rows;  // keys 0 .. t0+rows-1 are visible to the block
          for (int64_t j0 = 0; j0 < key_end; j0 += kBk) {
            const int64_t cols = std::min(kBk, key_end - j0);
            for (int64_t j = 0; j < cols; ++j) {
              const float* kj = k + ((b * S + j0 + j) * s.n_kv + g) * D;
              const float* vj = v + ((b * S + j0 + j) * s.n_kv + g) * D;
              for (int64_t d = 0; d < D; ++d) kt[d * kBk + j] = kj[d];
              std::memcpy(vb.data() + j * D, vj, sizeof(float) * D);
            }
            tile_abt(sc.data(), qb.data(), kt.data(), rows, cols, D, kBk);
            for (int64_t r = 0; r < rows; ++r) {
              float* sr = sc.data() + r * kBk;
              const int64_t visible = std::min(cols, t0 + r - j0 + 1);  // causal: j <= t
              float mx = m[r];
              for (int64_t j = 0; j < visible; ++j) mx = std::max(mx, sr[j]);
              const float correction = m[r] == neg_inf ? 0.0f : exp_approx(m[r] - mx);
              float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
              for (int64_t j = 0; j < visible; ++j) {
                sr[j] = exp_approx(sr[j] - mx);
                sum += sr[j];
              }
              for (int64_t j = std::max<int64_t>(visible, 0); j < cols; ++j) sr[j] = 0.0f;
              l[r] = l[r] * correction + sum;
              m[r] = mx;
              if (correction != 1.0f)
                for (int64_t d = 0; d < D; ++d) acc[r * D + d] *= correction;
            }
            tile_pv(acc.data(), sc.data(), vb.data(), rows, cols, D);
          }
          for (int64_t r = 0; r < rows; ++r) {
            float* dst = out + ((b * S + t0 + r) * s.n_q + h) * D;
            const float inv = 1.0f / l[r];
            for (int64_t d = 0; d < D; ++d) dst[d] = acc[r * D + d] * inv;
            lse[(b * s.n_q + h) * S + t0 + r] = m[r] + std::log(l[r]);
          }
        }
  }
}

// One task per (batch, kv head): it owns dK and dV of that head and dQ of the query heads
// that read it, so no two threads write the same row. K, K^T, V^T of the task's head are
// copied once into contiguous buffers.
template <>
void attention_backward<float>(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                               const float* v, const float* out, const float* lse, const AttentionShape& s) {
  const int64_t D = s.head_dim, group = s.n_q / s.n_kv, S = s.seq;
  const float scale = static_cast<float>(s.scale);
#pragma omp parallel
  {
    std::vector<float> kc(S * D), ktc(D * S), vtc(D * S), qb(kBq * D), dob(kBq * D), dqb(kBq * D), p(kBq * kBk),
        dp(kBq * kBk), di(kBq), li(kBq);
#pragma omp for collapse(2) schedule(dynamic, 1)
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t g = 0; g < s.n_kv; ++g) {
        for (int64_t j = 0; j < S; ++j) {
          const float* kj = k + ((b * S + j) * s.n_kv + g) * D;
          const float* vj = v + ((b * S + j) * s.n_kv + g) * D;
          std::memcpy(kc.data() + j * D, kj, sizeof(float) * D);
          for (int64_t d = 0; d < D; ++d) {
            ktc[d * S + j] = kj[d];
            vtc[d * S + j] = vj[d];
          }
        }
        for (int64_t h = g * group; h < (g + 1) * group; ++h)
          for (int64_t t0 = 0; t0 < S; t0 += kBq) {
            const int64_t rows = std::min(kBq, S - t0);
            for (int64_t r = 0; r < rows; ++r) {
              const int64_t row = (b * S + t0 + r) * s.n_q + h;
              std::memcpy(qb.data() + r * D, q + row * D, sizeof(float) * D);
              std::memcpy(dob.data() + r * D, dout + row * D, sizeof(float) * D);
              float dsum = 0.0f;
              for (int64_t d = 0; d < D; ++d) dsum += dout[row * D + d] * out[row * D + d];
              di[r] = dsum;
              li[r] = lse[(b * s.n_q + h) * S + t0 + r];
            }
            std::fill(dqb.begin(), dqb.end(), 0.0f);
            const int64_t key_end = t0 + rows;
            for (int64_t j0 = 0; j0 < key_end; j0 += kBk) {
              const int64_t cols = std::min(kBk, key_end - j0);
              // Scores and dP = dO V^T for the tile, both [rows, cols].
              for (int64_t r = 0; r < rows; ++r) {
                float* pr = p.data() + r * kBk;
                float* dpr = dp.data() + r * kBk;
                for (int64_t j = 0; j < cols; ++j) pr[j] = dpr[j] = 0.0f;
                for (int64_t d = 0; d < D; ++d) {
                  const float qd = qb[r * D + d], gd = dob[r * D + d];
                  const float* kt = ktc.data() + d * S + j0;
                  const float* vt = vtc.data() + d * S + j0;
#pragma omp simd
                  for (int64_t j = 0; j < cols; ++j) {
                    pr[j] += qd * kt[j];
                    dpr[j] += gd * vt[j];
                  }
                }
                const int64_t visible = std::min(cols, t0 + r - j0 + 1);
#pragma omp simd
                for (int64_t j = 0; j < visible; ++j) {
                  pr[j] = exp_approx(pr[j] * scale - li[r]);
                  dpr[j] = pr[j] * (dpr[j] - di[r]) * scale;  // dS
                }
                for (int64_t j = std::max<int64_t>(visible, 0); j < cols; ++j) pr[j] = dpr[j] = 0.0f;
              }
              // dV[j] += P^T dO ; dK[j] += dS^T Q ; dQ += dS K.
              for (int64_t j = 0; j < cols; ++j) {
                float* dvj = dv + ((b * S + j0 + j) * s.n_kv + g) * D;
                float* dkj = dk + ((b * S + j0 + j) * s.n_kv + g) * D;
                for (int64_t r = 0; r < rows; ++r) {
                  const float pw = p[r * kBk + j], sw = dp[r * kBk + j];
                  if (pw == 0.0f && sw == 0.0f) continue;
                  const float* dor = dob.data() + r * D;
                  const float* qr = qb.data() + r * D;
#pragma omp simd
                  for (int64_t d = 0; d < D; ++d) {
                    dvj[d] += pw * dor[d];
                    dkj[d] += sw * qr[d];
                  }
                }
              }
              tile_pv(dqb.data(), dp.data(), kc.data() + j0 * D, rows, cols, D);
            }
            for (int64_t r = 0; r < rows; ++r) {
              float* dst = dq + ((b * S + t0 + r) * s.n_q + h) * D;
              for (int64_t d = 0; d < D; ++d) dst[d] += dqb[r * D + d];
            }
          }
      }
  }
}

}  // namespace gatedlm::kernels
