// The float attention kernels: blocked like FlashAttention-2, with every tile product a
// register-blocked micro-kernel (attention_gemm.h) and the online softmax vectorised
// across queries. attention.cpp holds the simple reference versions, used for double
// precision and as the test oracle.
//
// Layout trick: score tiles are kept transposed, S^T [key j][query i], with queries along
// the vector lanes. The softmax statistics of a query (max, sum, log-sum-exp, D_i) are then
// lane-wise, so the online softmax needs no horizontal reductions, K and V are read in
// their natural row-major layout (one broadcast per element), and only the query block is
// transposed (once per task, not once per tile). Every tile is kB x kB = 64 x 64.
//
// Forward, one task per (batch, query head, query block): Q^T [D, kB] (pre-scaled) and the
// output accumulator O^T [D, kB] stay in L1/L2 across the key blocks;
//   S^T = K Q^T,  P^T = exp(S^T - m),  O^T = O^T * correction + V^T P^T.
// Backward, one task per (batch, kv head): it owns dK and dV of that kv head and dQ of the
// query heads that read it, so no two threads write the same row. A pre-pass copies Q^T,
// dO^T, dO and D_i = rowsum(dO * O) of the group's heads into contiguous buffers; then for
// each key block (dK, dV accumulated in a contiguous kB x D buffer, added to the strided
// global arrays once) and each query block at or below the diagonal:
//   S^T = K Q^T, dP^T = V dO^T, P^T = exp(S^T - lse), dS^T = P^T (dP^T - D) scale,
//   dV += P^T dO, dK += dS^T Q, dQ += dS K (straight into the global dq rows).
// On diagonal tiles the products skip the entries the causal mask zeroes (TileTrim).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/attention.h"
#include "kernels/attention_gemm.h"
#include "kernels/fast_math.h"

namespace gatedlm::kernels {
namespace {

using attn::TileTrim;
using attn::tile_gemm;

constexpr int64_t kB = 64;            // queries per block (lanes of a score tile) and keys per block
constexpr float kMinusBig = -1e30f;   // the running max before any key (exp of it minus anything is ~0)

#if defined(__AVX512F__)
// Lanes i of query vector c (i = 16 c + lane) that see key j: j0 + j <= t0 + i, off = j0 - t0.
inline __mmask16 visible_mask(int64_t j, int64_t c, int64_t off) {
  const int64_t first = j + off - 16 * c;  // first visible lane
  if (first <= 0) return 0xFFFF;
  if (first >= 16) return 0;
  return static_cast<__mmask16>(0xFFFFu << first);
}
#endif

// Online softmax over one tile of scores St [cols, kB] (rows: keys j0 + j; lanes: queries
// t0 + i). Replaces St by the unnormalised probabilities (zero where masked), updates the
// running max m and sum l of every query, and leaves in corr the factor by which the
// output accumulated so far must be rescaled.
void softmax_tile(float* St, int64_t cols, int64_t off, float* m, float* l, float* corr) {
  const bool diag = off + cols - 1 > 0;  // some key in the tile is later than query t0
#if defined(__AVX512F__)
  for (int64_t c = 0; c < kB / 16; ++c) {
    const __m512 m_old = _mm512_loadu_ps(m + 16 * c);
    __m512 mx = m_old;
    for (int64_t j = 0; j < cols; ++j) {
      const __mmask16 vis = diag ? visible_mask(j, c, off) : __mmask16(0xFFFF);
      mx = _mm512_mask_max_ps(mx, vis, mx, _mm512_loadu_ps(St + j * kB + 16 * c));
    }
    const __m512 cr = exp_approx16(_mm512_sub_ps(m_old, mx));
    __m512 sum = _mm512_setzero_ps();
    for (int64_t j = 0; j < cols; ++j) {
      const __mmask16 vis = diag ? visible_mask(j, c, off) : __mmask16(0xFFFF);
      float* sp = St + j * kB + 16 * c;
      const __m512 p = vis ? _mm512_maskz_mov_ps(vis, exp_approx16(_mm512_sub_ps(_mm512_loadu_ps(sp), mx)))
                           : _mm512_setzero_ps();
      _mm512_storeu_ps(sp, p);
      sum = _mm512_add_ps(sum, p);
    }
    _mm512_storeu_ps(l + 16 * c, _mm512_fmadd_ps(_mm512_loadu_ps(l + 16 * c), cr, sum));
    _mm512_storeu_ps(m + 16 * c, mx);
    _mm512_storeu_ps(corr + 16 * c, cr);
  }
#else
  float mx[kB], sum[kB];
  for (int64_t i = 0; i < kB; ++i) {
    mx[i] = m[i];
    sum[i] = 0.0f;
  }
  for (int64_t j = 0; j < cols; ++j) {
    const float* sr = St + j * kB;
    const int64_t first = diag ? std::clamp<int64_t>(j + off, 0, kB) : 0;
    for (int64_t i = first; i < kB; ++i) mx[i] = std::max(mx[i], sr[i]);
  }
  for (int64_t j = 0; j < cols; ++j) {
    float* sr = St + j * kB;
    const int64_t first = diag ? std::clamp<int64_t>(j + off, 0, kB) : 0;
    for (int64_t i = 0; i < first; ++i) sr[i] = 0.0f;
#pragma omp simd
    for (int64_t i = first; i < kB; ++i) {
      sr[i] = exp_approx(sr[i] - mx[i]);
      sum[i] += sr[i];
    }
  }
  for (int64_t i = 0; i < kB; ++i) {
    corr[i] = exp_approx(m[i] - mx[i]);
    l[i] = l[i] * corr[i] + sum[i];
    m[i] = mx[i];
  }
#endif
}

// Backward tile: St [cols, kB] scores -> P^T, dPt -> dS^T = P^T (dP^T - D) scale, zero
// where masked. lse and di are the tile's kB query statistics.
void grad_tile(float* St, float* dPt, int64_t cols, int64_t off, const float* lse, const float* di, float scale) {
  const bool diag = off + cols - 1 > 0;
#if defined(__AVX512F__)
  const __m512 sc = _mm512_set1_ps(scale);
  for (int64_t c = 0; c < kB / 16; ++c) {
    const __m512 lv = _mm512_loadu_ps(lse + 16 * c), dv = _mm512_loadu_ps(di + 16 * c);
    for (int64_t j = 0; j < cols; ++j) {
      const __mmask16 vis = diag ? visible_mask(j, c, off) : __mmask16(0xFFFF);
      float* sp = St + j * kB + 16 * c;
      float* dp = dPt + j * kB + 16 * c;
      if (!vis) {
        _mm512_storeu_ps(sp, _mm512_setzero_ps());
        _mm512_storeu_ps(dp, _mm512_setzero_ps());
        continue;
      }
      const __m512 p = _mm512_maskz_mov_ps(vis, exp_approx16(_mm512_sub_ps(_mm512_loadu_ps(sp), lv)));
      const __m512 ds = _mm512_mul_ps(_mm512_mul_ps(p, sc), _mm512_sub_ps(_mm512_loadu_ps(dp), dv));
      _mm512_storeu_ps(sp, p);
      _mm512_storeu_ps(dp, _mm512_maskz_mov_ps(vis, ds));
    }
  }
#else
  for (int64_t j = 0; j < cols; ++j) {
    float* sr = St + j * kB;
    float* dr = dPt + j * kB;
    const int64_t first = diag ? std::clamp<int64_t>(j + off, 0, kB) : 0;
    for (int64_t i = 0; i < first; ++i) sr[i] = dr[i] = 0.0f;
#pragma omp simd
    for (int64_t i = first; i < kB; ++i) {
      const float p = exp_approx(sr[i] - lse[i]);
      sr[i] = p;
      dr[i] = p * (dr[i] - di[i]) * scale;
    }
  }
#endif
}

}  // namespace

template <>
void attention_forward<float>(float* out, float* lse, const float* q, const float* k, const float* v,
                              const AttentionShape& s, const float* gate_score, float* gated_out) {
  const int64_t D = s.head_dim, group = s.n_q / s.n_kv, S = s.seq;
  const int64_t q_blocks = (S + kB - 1) / kB, ldq = s.n_q * D, ldk = s.n_kv * D;
  const float scale = static_cast<float>(s.scale);
#pragma omp parallel
  {
    std::vector<float> qt(D * kB), ot(D * kB), st(kB * kB), m(kB), l(kB), corr(kB);
#pragma omp for collapse(3) schedule(dynamic, 1)
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t h = 0; h < s.n_q; ++h)
        for (int64_t blk = q_blocks - 1; blk >= 0; --blk) {  // longest rows first
          const int64_t g = h / group, t0 = blk * kB, rows = std::min(kB, S - t0);
          const float* qb = q + (b * S + t0) * ldq + h * D;
          for (int64_t d = 0; d < D; ++d) {
            float* dst = qt.data() + d * kB;
            for (int64_t i = 0; i < rows; ++i) dst[i] = qb[i * ldq + d] * scale;
            for (int64_t i = rows; i < kB; ++i) dst[i] = 0.0f;
          }
          std::fill(m.begin(), m.end(), kMinusBig);
          std::fill(l.begin(), l.end(), 0.0f);
          for (int64_t j0 = 0; j0 < t0 + rows; j0 += kB) {
            const int64_t cols = std::min(kB, S - j0), off = j0 - t0;
            const bool diag = j0 == t0;
            const float* kb = k + (b * S + j0) * ldk + g * D;
            const float* vb = v + (b * S + j0) * ldk + g * D;
            // S^T [cols, kB] = K Q^T; on the diagonal, row j needs queries i >= j only.
            TileTrim trim;
            if (diag) trim.n_lo_off = off;
            tile_gemm(cols, kB, D, kb, ldk, 1, qt.data(), kB, st.data(), kB, false, nullptr, trim);
            softmax_tile(st.data(), cols, off, m.data(), l.data(), corr.data());
            // O^T [D, kB] = O^T * corr + V^T P^T. On the diagonal, keys 16 s .. 16 s + 15 are
            // seen by query vectors s.. only.
            if (!diag) {
              tile_gemm(D, kB, cols, vb, 1, ldk, st.data(), kB, ot.data(), kB, j0 > 0, corr.data());
            } else {
              for (int64_t k0 = 0; k0 < cols; k0 += 16) {
                const int64_t kn = std::min<int64_t>(16, cols - k0);
                tile_gemm(D, kB - k0, kn, vb + k0 * ldk, 1, ldk, st.data() + k0 * kB + k0, kB, ot.data() + k0, kB,
                          k0 > 0 || j0 > 0, k0 == 0 ? corr.data() : nullptr);
              }
            }
          }
          for (int64_t i = 0; i < rows; ++i) {
            const int64_t row = (b * S + t0 + i) * ldq + h * D;
            float* dst = out + row;
            const float inv = 1.0f / l[i];
            for (int64_t d = 0; d < D; ++d) dst[d] = ot[d * kB + i] * inv;
            if (gate_score) {
              const float* gs = gate_score + row;
              float* go = gated_out + row;
#pragma omp simd
              for (int64_t d = 0; d < D; ++d) go[d] = dst[d] * gs[d];
            }
            lse[(b * s.n_q + h) * S + t0 + i] = m[i] + std::log(l[i]);
          }
        }
  }
}

template <>
void attention_backward<float>(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                               const float* v, const float* out, const float* lse, const AttentionShape& s,
                               const float* gate_score, float* dgate_score) {
  const int64_t D = s.head_dim, group = s.n_q / s.n_kv, S = s.seq;
  const int64_t Sp = (S + kB - 1) / kB * kB, ldq = s.n_q * D, ldk = s.n_kv * D;
  const float scale = static_cast<float>(s.scale);
#pragma omp parallel
  {
    // Per head of the group: Q^T and dO^T [D, Sp] (zero-padded), dO [S, D], D_i and lse [Sp].
    std::vector<float> qt(group * D * Sp), dot(group * D * Sp), dor(group * S * D), di(group * Sp),
        ls(group * Sp), st(kB * kB), dpt(kB * kB), dkb(kB * D), dvb(kB * D);
#pragma omp for collapse(2) schedule(dynamic, 1)
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t g = 0; g < s.n_kv; ++g) {
        for (int64_t hh = 0; hh < group; ++hh) {
          const int64_t h = g * group + hh;
          float* qth = qt.data() + hh * D * Sp;
          float* doth = dot.data() + hh * D * Sp;
          float* dorh = dor.data() + hh * S * D;
          float* dih = di.data() + hh * Sp;
          float* lsh = ls.data() + hh * Sp;
          for (int64_t t = 0; t < S; ++t) {
            const int64_t row = (b * S + t) * ldq + h * D;
            const float* go = dout + row;
            const float* ot = out + row;
            float* dr = dorh + t * D;
            if (gate_score) {
              const float* gs = gate_score + row;
              float* dg = dgate_score + row;
#pragma omp simd
              for (int64_t d = 0; d < D; ++d) {
                dr[d] = go[d] * gs[d];
                dg[d] = go[d] * ot[d];
              }
            } else {
              std::memcpy(dr, go, sizeof(float) * D);
            }
            float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
            for (int64_t d = 0; d < D; ++d) sum += dr[d] * ot[d];
            dih[t] = sum;
            lsh[t] = lse[(b * s.n_q + h) * S + t];
            const float* qr = q + row;
            for (int64_t d = 0; d < D; ++d) {
              qth[d * Sp + t] = qr[d] * scale;
              doth[d * Sp + t] = dr[d];
            }
          }
          for (int64_t t = S; t < Sp; ++t) {
            dih[t] = lsh[t] = 0.0f;
            for (int64_t d = 0; d < D; ++d) qth[d * Sp + t] = doth[d * Sp + t] = 0.0f;
          }
        }
        for (int64_t j0 = 0; j0 < S; j0 += kB) {
          const int64_t cols = std::min(kB, S - j0);
          const float* kb = k + (b * S + j0) * ldk + g * D;
          const float* vb = v + (b * S + j0) * ldk + g * D;
          std::fill(dkb.begin(), dkb.end(), 0.0f);
          std::fill(dvb.begin(), dvb.end(), 0.0f);
          for (int64_t hh = 0; hh < group; ++hh) {
            const int64_t h = g * group + hh;
            for (int64_t t0 = j0; t0 < S; t0 += kB) {
              const int64_t rows = std::min(kB, S - t0), off = j0 - t0;
              const bool diag = t0 == j0;
              TileTrim s_trim, kv_trim, q_trim;  // causal zeros of the diagonal tile
              if (diag) {
                s_trim.n_lo_off = 0;   // S^T row j: queries i >= j
                kv_trim.k_lo_off = 0;  // dK/dV row j: sum over queries i >= j
                q_trim.k_hi_off = 0;   // dQ row i: sum over keys j <= i
              }
              const float* qth = qt.data() + hh * D * Sp + t0;
              const float* doth = dot.data() + hh * D * Sp + t0;
              tile_gemm(cols, kB, D, kb, ldk, 1, qth, Sp, st.data(), kB, false, nullptr, s_trim);
              tile_gemm(cols, kB, D, vb, ldk, 1, doth, Sp, dpt.data(), kB, false, nullptr, s_trim);
              grad_tile(st.data(), dpt.data(), cols, off, ls.data() + hh * Sp + t0, di.data() + hh * Sp + t0, scale);
              const float* dorh = dor.data() + (hh * S + t0) * D;
              const float* qb = q + (b * S + t0) * ldq + h * D;
              tile_gemm(cols, D, rows, st.data(), kB, 1, dorh, D, dvb.data(), D, true, nullptr, kv_trim);
              tile_gemm(cols, D, rows, dpt.data(), kB, 1, qb, ldq, dkb.data(), D, true, nullptr, kv_trim);
              tile_gemm(rows, D, cols, dpt.data(), 1, kB, kb, ldk, dq + (b * S + t0) * ldq + h * D, ldq, true,
                        nullptr, q_trim);
            }
          }
          for (int64_t j = 0; j < cols; ++j) {
            float* dkr = dk + (b * S + j0 + j) * ldk + g * D;
            float* dvr = dv + (b * S + j0 + j) * ldk + g * D;
            const float* sk = dkb.data() + j * D;
            const float* sv = dvb.data() + j * D;
#pragma omp simd
            for (int64_t d = 0; d < D; ++d) {
              dkr[d] += sk[d];
              dvr[d] += sv[d];
            }
          }
        }
      }
  }
}

}  // namespace gatedlm::kernels
