// The float attention kernels: blocked like FlashAttention-2, with every tile product a
// register-blocked micro-kernel (attention_gemm.h). attention.cpp holds the simple
// reference versions, used for double precision and as the test oracle. Every tile is
// kB x kB = 64 x 64 (a score tile is 16 KiB: the tiles of a step stay in L1/L2).
//
// Forward, one task per (batch, query head, query block). Score tiles are transposed,
// S^T [key j][query i], with queries along the vector lanes: the online-softmax statistics
// (running max, sum, rescale factor) are then lane-wise, with no horizontal reductions, and
// K and V are read in place (one broadcast per element). Only the query block is
// transposed, once per task: Q^T [D, kB] (pre-scaled) and the accumulator O^T [D, kB]:
//   S^T = K Q^T,  P^T = exp(S^T - m),  O^T = O^T * correction + V^T P^T.
//
// Backward, one task per (batch, kv head): it owns dK and dV of that kv head and dQ of the
// query heads that read it, so no two threads write the same row (all tasks cost the same,
// so dynamic scheduling keeps both threads busy; with too few such pairs, per range of key
// blocks, see attention_backward_f32). Here the softmax statistics are fixed
// (lse, D_i = rowsum(dO * O)), so tiles keep queries in rows; a pre-pass computes D_i (and
// dO * gate when gated). Per key block, K^T and V^T [D, kB] are transposed once and dK, dV
// accumulate in contiguous kB x D buffers that are added to the strided arrays once; per
// query block at or below the diagonal (for every head of the group):
//   S = Q K^T, dP = dO V^T, P = exp(scale S - lse), dS = P (dP - D) scale,
//   dV += P^T dO, dK += dS^T Q, dQ += dS K (straight into the task's own dq rows).
// On diagonal tiles the products skip the blocks the causal mask zeroes (TileTrim).
//
// A sliding window W (AttentionShape::window) skips the key blocks no query of a block sees
// and, on the tiles the window's lower edge crosses, masks the keys j <= t - W: before the
// online softmax (so they raise no maximum) and after it, and after grad_tile in the backward.
// Only those few edge tiles pay for it.
//
// Softpick (AttentionShape::softpick) runs through the same tiles: the online max starts at 0
// instead of -infinity and the tile's terms are e^(a-m) - e^(-m) (normalize_tile<true>); the
// backward's P = e^(a - L) gives softpick's weights and dS by the sign of each score
// (grad_tile<true>).
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
// GCC 12 flags the deliberately undefined vectors inside its own AVX-512 intrinsics
// (_mm512_undefined_ps, GCC bug 105593) once they are inlined here.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/attention.h"
#include "kernels/kernel_sets.h"

#include "kernels/kernel_set_begin.h"
#include "kernels/fast_math.h"
#include "kernels/attention_gemm.h"

namespace gatedlm::kernels::GATEDLM_KSET {
namespace {

using attn::TileTrim;
using attn::tile_gemm;

constexpr int64_t kB = 64;            // queries per block (lanes of a score tile) and keys per block
constexpr float kMinusBig = -1e30f;   // the running max before any key (exp of it minus anything is ~0)
constexpr float kOutside = -3e38f;    // a score outside the window: below kMinusBig, so never a max

// Whether a tile of keys j0.. against queries t0 .. t0 + kB - 1 holds a key some query's
// window has left behind (j <= t - W).
inline bool crosses_window_edge(int64_t j0, int64_t t0, int64_t window) {
  return window > 0 && j0 <= t0 + kB - 1 - window;
}

// Sets the scores of a tile to `value` where key j0 + j is outside query t0 + i's window.
// keys_in_rows: the forward's S^T [key j][query i]; else the backward's [query i][key j].
void fill_outside_window(float* tile, int64_t rows, int64_t cols, int64_t j0, int64_t t0, int64_t window,
                         bool keys_in_rows, float value) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols && j0 + j <= t0 + i - window; ++j) (keys_in_rows ? tile[j * kB + i] : tile[i * kB + j]) = value;
}

#if GATEDLM_KSET_AVX512
// Lanes i of query vector c (i = 16 c + lane) that see key j: j0 + j <= t0 + i, off = j0 - t0.
inline __mmask16 visible_mask(int64_t j, int64_t c, int64_t off) {
  const int64_t first = j + off - 16 * c;  // first visible lane
  if (first <= 0) return 0xFFFF;
  if (first >= 16) return 0;
  return static_cast<__mmask16>(0xFFFFu << first);
}
#elif GATEDLM_KSET_AVX2
// The same for 8 lanes (i = 8 c + lane), as a blend mask: all bits set in a visible lane.
inline __m256 visible_mask8(int64_t j, int64_t c, int64_t off) {
  const int64_t first = std::clamp<int64_t>(j + off - 8 * c, 0, 8);
  return _mm256_castsi256_ps(
      _mm256_cmpgt_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(static_cast<int>(first) - 1)));
}
#endif

// Online softmax over one tile of scores St [cols, kB] (rows: keys j0 + j; lanes: queries
// t0 + i). Replaces St by the unnormalised probabilities (zero where masked), updates the
// running max m and sum l of every query, and leaves in corr the factor by which the
// output accumulated so far must be rescaled.
//
// kSoftpick: the same online form of softpick (attention.h). With m the running max of 0 and
// the scores (the caller starts m at 0), a key's term is e = e^(a-m) - e^(-m), i.e. (e^a - 1)
// e^(-m); the tile keeps relu(e) and l sums |e|. A change of m rescales both by e^(m_old - m)
// as softmax's do. Scores of kOutside (beyond a sliding window) count for nothing: unlike
// softmax's, their e would be -e^(-m), not 0.
// One definition per kernel set (the sets' vector widths differ).
#if GATEDLM_KSET_AVX512
template <bool kSoftpick>
void normalize_tile(float* St, int64_t cols, int64_t off, float* m, float* l, float* corr) {
  const bool diag = off + cols - 1 > 0;  // some key in the tile is later than query t0
  const __m512 zero = _mm512_setzero_ps(), lowest = _mm512_set1_ps(kMinusBig);
  for (int64_t c = 0; c < kB / 16; ++c) {
    const __m512 m_old = _mm512_loadu_ps(m + 16 * c);
    __m512 mx = m_old;
    for (int64_t j = 0; j < cols; ++j) {
      const __mmask16 vis = diag ? visible_mask(j, c, off) : __mmask16(0xFFFF);
      mx = _mm512_mask_max_ps(mx, vis, mx, _mm512_loadu_ps(St + j * kB + 16 * c));
    }
    const __m512 cr = exp_approx16(_mm512_sub_ps(m_old, mx));
    const __m512 below = kSoftpick ? exp_approx16(_mm512_sub_ps(zero, mx)) : zero;
    __m512 sum = zero;
    for (int64_t j = 0; j < cols; ++j) {
      __mmask16 vis = diag ? visible_mask(j, c, off) : __mmask16(0xFFFF);
      float* sp = St + j * kB + 16 * c;
      const __m512 sv = _mm512_loadu_ps(sp);
      if constexpr (kSoftpick) vis &= _mm512_cmp_ps_mask(sv, lowest, _CMP_GT_OQ);
      __m512 p = vis ? _mm512_maskz_mov_ps(vis, exp_approx16(_mm512_sub_ps(sv, mx))) : zero;
      if constexpr (kSoftpick) {
        p = _mm512_maskz_sub_ps(vis, p, below);
        sum = _mm512_add_ps(sum, _mm512_abs_ps(p));
        p = _mm512_max_ps(p, zero);
      } else {
        sum = _mm512_add_ps(sum, p);
      }
      _mm512_storeu_ps(sp, p);
    }
    _mm512_storeu_ps(l + 16 * c, _mm512_fmadd_ps(_mm512_loadu_ps(l + 16 * c), cr, sum));
    _mm512_storeu_ps(m + 16 * c, mx);
    _mm512_storeu_ps(corr + 16 * c, cr);
  }
}
#elif GATEDLM_KSET_AVX2
template <bool kSoftpick>
void normalize_tile(float* St, int64_t cols, int64_t off, float* m, float* l, float* corr) {
  const bool diag = off + cols - 1 > 0;  // some key in the tile is later than query t0
  const __m256 zero = _mm256_setzero_ps(), lowest = _mm256_set1_ps(kMinusBig);
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  for (int64_t c = 0; c < kB / 8; ++c) {
    const __m256 m_old = _mm256_loadu_ps(m + 8 * c);
    __m256 mx = m_old;
    for (int64_t j = 0; j < cols; ++j) {
      const __m256 top = _mm256_max_ps(mx, _mm256_loadu_ps(St + j * kB + 8 * c));
      mx = diag ? _mm256_blendv_ps(mx, top, visible_mask8(j, c, off)) : top;
    }
    const __m256 cr = exp_approx8(_mm256_sub_ps(m_old, mx));
    const __m256 below = kSoftpick ? exp_approx8(_mm256_sub_ps(zero, mx)) : zero;
    __m256 sum = zero;
    for (int64_t j = 0; j < cols; ++j) {
      float* sp = St + j * kB + 8 * c;
      const __m256 sv = _mm256_loadu_ps(sp);
      __m256 p = exp_approx8(_mm256_sub_ps(sv, mx));
      if constexpr (kSoftpick) {
        __m256 keep = _mm256_cmp_ps(sv, lowest, _CMP_GT_OQ);
        if (diag) keep = _mm256_and_ps(keep, visible_mask8(j, c, off));
        p = _mm256_and_ps(_mm256_sub_ps(p, below), keep);
        sum = _mm256_add_ps(sum, _mm256_and_ps(p, magnitude));
        p = _mm256_max_ps(p, zero);
      } else {
        if (diag) p = _mm256_and_ps(p, visible_mask8(j, c, off));
        sum = _mm256_add_ps(sum, p);
      }
      _mm256_storeu_ps(sp, p);
    }
    _mm256_storeu_ps(l + 8 * c, _mm256_fmadd_ps(_mm256_loadu_ps(l + 8 * c), cr, sum));
    _mm256_storeu_ps(m + 8 * c, mx);
    _mm256_storeu_ps(corr + 8 * c, cr);
  }
}
#else
template <bool kSoftpick>
void normalize_tile(float* St, int64_t cols, int64_t off, float* m, float* l, float* corr) {
  const bool diag = off + cols - 1 > 0;  // some key in the tile is later than query t0
  float mx[kB], sum[kB], below[kB];
  for (int64_t i = 0; i < kB; ++i) {
    mx[i] = m[i];
    sum[i] = 0.0f;
  }
  for (int64_t j = 0; j < cols; ++j) {
    const float* sr = St + j * kB;
    const int64_t first = diag ? std::clamp<int64_t>(j + off, 0, kB) : 0;
    for (int64_t i = first; i < kB; ++i) mx[i] = std::max(mx[i], sr[i]);
  }
  for (int64_t i = 0; i < kB; ++i) below[i] = kSoftpick ? exp_approx(-mx[i]) : 0.0f;
  for (int64_t j = 0; j < cols; ++j) {
    float* sr = St + j * kB;
    const int64_t first = diag ? std::clamp<int64_t>(j + off, 0, kB) : 0;
    for (int64_t i = 0; i < first; ++i) sr[i] = 0.0f;
#pragma omp simd
    for (int64_t i = first; i < kB; ++i) {
      const float p = exp_approx(sr[i] - mx[i]);
      if constexpr (kSoftpick) {
        const float e = sr[i] > kMinusBig ? p - below[i] : 0.0f;
        sum[i] += std::abs(e);
        sr[i] = std::max(e, 0.0f);
      } else {
        sr[i] = p;
        sum[i] += p;
      }
    }
  }
  for (int64_t i = 0; i < kB; ++i) {
    corr[i] = exp_approx(m[i] - mx[i]);
    l[i] = l[i] * corr[i] + sum[i];
    m[i] = mx[i];
  }
}
#endif

// Backward tile, queries in rows: St [rows, cols] raw scores Q K^T -> P = exp(scale S - lse),
// dPt [rows, cols] -> dS = P (dP - D) scale, both zero where masked (off = j0 - t0). lse and
// di are the tile's per-query statistics.
//
// kSoftpick (lse holds L = log sum |e^a - 1|, attention.h): with P = e^(a - L), a = scale S,
// the weight is p = P - e^(-L) where a > 0 (else 0) and dS = P scale (dP - D) where a > 0,
// P scale D where a < 0 (d|e^a - 1|/da = sign(a) e^a), 0 at a = 0. A row with L = +inf has
// no weights and passes no gradient.
template <bool kSoftpick>
void grad_tile(float* St, float* dPt, int64_t rows, int64_t cols, int64_t off, const float* lse, const float* di,
               float scale) {
  for (int64_t i = 0; i < rows; ++i) {
    float* sr = St + i * kB;
    float* dr = dPt + i * kB;
    const bool no_weights = kSoftpick && !(lse[i] < std::numeric_limits<float>::infinity());
    const int64_t visible = no_weights ? 0 : std::clamp<int64_t>(i - off + 1, 0, cols);  // keys j < visible
    const float below = kSoftpick && !no_weights ? std::exp(-lse[i]) : 0.0f;
    int64_t j = 0;
#if GATEDLM_KSET_AVX512
    const __m512 sc = _mm512_set1_ps(scale), lv = _mm512_set1_ps(lse[i]), dv = _mm512_set1_ps(di[i]);
    for (; j < visible; j += 16) {
      const __mmask16 vis = tail_mask(visible - j);
      const __m512 sv = _mm512_loadu_ps(sr + j), dp = _mm512_loadu_ps(dr + j);  // sign(a) = sign(S)
      const __m512 p = exp_approx16(_mm512_fmsub_ps(sv, sc, lv));
      __m512 w = p, g = _mm512_sub_ps(dp, dv);
      if constexpr (kSoftpick) {
        const __mmask16 pos = _mm512_cmp_ps_mask(sv, _mm512_setzero_ps(), _CMP_GT_OQ);
        const __mmask16 neg = _mm512_cmp_ps_mask(sv, _mm512_setzero_ps(), _CMP_LT_OQ);
        w = _mm512_maskz_sub_ps(pos, p, _mm512_set1_ps(below));
        g = _mm512_mask_mov_ps(_mm512_maskz_mov_ps(pos, g), neg, dv);
      }
      _mm512_mask_storeu_ps(sr + j, vis, w);
      _mm512_mask_storeu_ps(dr + j, vis, _mm512_mul_ps(_mm512_mul_ps(p, sc), g));
    }
    j = visible;
#elif GATEDLM_KSET_AVX2
    const __m256 sc = _mm256_set1_ps(scale), lv = _mm256_set1_ps(lse[i]), dv = _mm256_set1_ps(di[i]);
    for (; j + 8 <= visible; j += 8) {
      const __m256 sv = _mm256_loadu_ps(sr + j), dp = _mm256_loadu_ps(dr + j);  // sign(a) = sign(S)
      const __m256 p = exp_approx8(_mm256_fmsub_ps(sv, sc, lv));
      __m256 w = p, g = _mm256_sub_ps(dp, dv);
      if constexpr (kSoftpick) {
        const __m256 pos = _mm256_cmp_ps(sv, _mm256_setzero_ps(), _CMP_GT_OQ);
        const __m256 neg = _mm256_cmp_ps(sv, _mm256_setzero_ps(), _CMP_LT_OQ);
        w = _mm256_and_ps(_mm256_sub_ps(p, _mm256_set1_ps(below)), pos);
        g = _mm256_or_ps(_mm256_and_ps(g, pos), _mm256_and_ps(dv, neg));
      }
      _mm256_storeu_ps(sr + j, w);
      _mm256_storeu_ps(dr + j, _mm256_mul_ps(_mm256_mul_ps(p, sc), g));
    }
#endif
    for (; j < visible; ++j) {
      const float sv = sr[j], p = exp_approx(sv * scale - lse[i]);
      float w = p, g = dr[j] - di[i];
      if constexpr (kSoftpick) {
        w = sv > 0.0f ? p - below : 0.0f;
        g = sv > 0.0f ? g : sv < 0.0f ? di[i] : 0.0f;
      }
      sr[j] = w;
      dr[j] = p * scale * g;
    }
    for (; j < cols; ++j) sr[j] = dr[j] = 0.0f;
  }
}

}  // namespace

void attention_forward_f32(float* out, float* lse, const float* q, const float* k, const float* v,
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
          if (rows < kB) std::fill(qt.begin(), qt.end(), 0.0f);  // padding queries
          attn::transpose(qt.data(), kB, q + (b * S + t0) * ldq + h * D, ldq, rows, D, scale);
          std::fill(m.begin(), m.end(), s.softpick ? 0.0f : kMinusBig);  // softpick's max starts at 0
          std::fill(l.begin(), l.end(), 0.0f);
          const int64_t j_first = s.first_key(t0) / kB * kB;  // the first key block the window leaves
          for (int64_t j0 = j_first; j0 < t0 + rows; j0 += kB) {
            const int64_t cols = std::min(kB, S - j0), off = j0 - t0;
            const bool diag = j0 == t0, edge = crosses_window_edge(j0, t0, s.window);
            const float* kb = k + (b * S + j0) * ldk + g * D;
            const float* vb = v + (b * S + j0) * ldk + g * D;
            // S^T [cols, kB] = K Q^T; on the diagonal, row j needs queries i >= j only.
            TileTrim trim;
            if (diag) trim.n_lo_off = off;
            tile_gemm(cols, kB, D, kb, ldk, 1, qt.data(), kB, st.data(), kB, false, nullptr, trim);
            if (edge) fill_outside_window(st.data(), kB, cols, j0, t0, s.window, true, kOutside);
            if (s.softpick)
              normalize_tile<true>(st.data(), cols, off, m.data(), l.data(), corr.data());
            else
              normalize_tile<false>(st.data(), cols, off, m.data(), l.data(), corr.data());
            if (edge) fill_outside_window(st.data(), kB, cols, j0, t0, s.window, true, 0.0f);
            // O^T [D, kB] = O^T * corr + V^T P^T. On the diagonal, keys 16 s .. 16 s + 15 are
            // seen by query vectors s.. only.
            if (!diag) {
              tile_gemm(D, kB, cols, vb, 1, ldk, st.data(), kB, ot.data(), kB, j0 > j_first, corr.data());
            } else {
              for (int64_t k0 = 0; k0 < cols; k0 += 16) {
                const int64_t kn = std::min<int64_t>(16, cols - k0);
                tile_gemm(D, kB - k0, kn, vb + k0 * ldk, 1, ldk, st.data() + k0 * kB + k0, kB, ot.data() + k0, kB,
                          k0 > 0 || j0 > j_first, k0 == 0 ? corr.data() : nullptr);
              }
            }
          }
          for (int64_t i = 0; i < kB; ++i) corr[i] = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;  // softpick: 0 = no weights
          for (int64_t d = 0; d < D; ++d) {
            float* o = ot.data() + d * kB;
#pragma omp simd
            for (int64_t i = 0; i < kB; ++i) o[i] *= corr[i];
          }
          attn::transpose(out + (b * S + t0) * ldq + h * D, ldq, ot.data(), kB, D, rows);
          for (int64_t i = 0; i < rows; ++i) {
            const int64_t row = (b * S + t0 + i) * ldq + h * D;
            const float* dst = out + row;
            if (gate_score) {
              const float* gs = gate_score + row;
              float* go = gated_out + row;
#pragma omp simd
              for (int64_t d = 0; d < D; ++d) go[d] = dst[d] * gs[d];
            }
            lse[(b * s.n_q + h) * S + t0 + i] =
                l[i] > 0.0f ? m[i] + std::log(l[i]) : std::numeric_limits<float>::infinity();
          }
        }
  }
}

namespace {

struct BackwardArgs {
  float *dq, *dk, *dv;
  const float *dout, *q, *k, *v, *out, *lse, *gate_score;
  float* dgate_score;
  GateGradLayout dgate_layout;  // ld resolved (never 0)
  int64_t batch, S, n_q, D, group, ldq, ldk;
  float scale;
  int64_t window;  // AttentionShape::window
  bool softpick;   // AttentionShape::softpick
};

// Pre-pass for (batch b, kv head g): per head hh of the group, D_i -> di [hh * S + t], lse
// -> ls [hh * S + t], and when gated dO * gate -> dor [(hh * S + t) * D] and
// dgate_score = dout * out (times gate * (1 - gate) through the sigmoid).
void backward_prepass(const BackwardArgs& a, int64_t b, int64_t g, float* di, float* ls, float* dor) {
  const int64_t D = a.D, S = a.S;
  for (int64_t hh = 0; hh < a.group; ++hh) {
    const int64_t h = g * a.group + hh;
    for (int64_t t = 0; t < S; ++t) {
      const int64_t row = (b * S + t) * a.ldq + h * D;
      const float* go = a.dout + row;
      const float* ot = a.out + row;
      const float* dr = go;
      if (a.gate_score) {
        const float* gs = a.gate_score + row;
        float* dg = a.dgate_score + (b * S + t) * a.dgate_layout.ld + h * D;
        float* dd = dor + (hh * S + t) * D;
        const bool sigmoid = a.dgate_layout.through_sigmoid;
#pragma omp simd
        for (int64_t d = 0; d < D; ++d) {
          dd[d] = go[d] * gs[d];
          dg[d] = go[d] * ot[d] * (sigmoid ? gs[d] * (1.0f - gs[d]) : 1.0f);
        }
        dr = dd;
      }
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (int64_t d = 0; d < D; ++d) sum += dr[d] * ot[d];
      di[hh * S + t] = sum;
      ls[hh * S + t] = a.lse[(b * a.n_q + h) * S + t];
    }
  }
}

// Per-thread scratch: K^T, V^T [D, kB]; score tiles [kB, kB]; dK, dV accumulators [kB, D].
struct BackwardScratch {
  std::vector<float> kt, vt, st, dpt, dkb, dvb;
  explicit BackwardScratch(int64_t D)
      : kt(D * kB), vt(D * kB), st(kB * kB), dpt(kB * kB), dkb(kB * D), dvb(kB * D) {}
};

// Key block j0 of (b, g) against every query block at or below the diagonal, for every
// head of the group: dK, dV of the block are added to the global arrays, dQ to dq_base
// (laid out like dq).
void backward_key_block(const BackwardArgs& a, int64_t b, int64_t g, int64_t j0, const float* di, const float* ls,
                        const float* dor, float* dq_base, BackwardScratch& w) {
  const int64_t D = a.D, S = a.S, ldq = a.ldq, ldk = a.ldk, cols = std::min(kB, S - j0);
  const float* kb = a.k + (b * S + j0) * ldk + g * D;
  const float* vb = a.v + (b * S + j0) * ldk + g * D;
  attn::transpose(w.kt.data(), kB, kb, ldk, cols, D);
  attn::transpose(w.vt.data(), kB, vb, ldk, cols, D);
  std::fill(w.dkb.begin(), w.dkb.end(), 0.0f);
  std::fill(w.dvb.begin(), w.dvb.end(), 0.0f);
  for (int64_t hh = 0; hh < a.group; ++hh) {
    const int64_t h = g * a.group + hh;
    // Query blocks at or below the diagonal that still see a key of the block (t < j + W).
    for (int64_t t0 = j0; t0 < S && (a.window == 0 || t0 < j0 + cols - 1 + a.window); t0 += kB) {
      const int64_t rows = std::min(kB, S - t0), off = j0 - t0;
      TileTrim s_trim, kv_trim, q_trim;  // causal zeros of the diagonal tile
      if (t0 == j0) {
        s_trim.n_hi_off = 0;   // S, dP row i: keys j <= i
        kv_trim.k_lo_off = 0;  // dK, dV row j: queries i >= j
        q_trim.k_hi_off = 0;   // dQ row i: keys j <= i
      }
      const float* qb = a.q + (b * S + t0) * ldq + h * D;
      const float* dob = a.gate_score ? dor + (hh * S + t0) * D : a.dout + (b * S + t0) * ldq + h * D;
      const int64_t ldo = a.gate_score ? D : ldq;
      tile_gemm(rows, cols, D, qb, ldq, 1, w.kt.data(), kB, w.st.data(), kB, false, nullptr, s_trim);
      tile_gemm(rows, cols, D, dob, ldo, 1, w.vt.data(), kB, w.dpt.data(), kB, false, nullptr, s_trim);
      (a.softpick ? grad_tile<true> : grad_tile<false>)(w.st.data(), w.dpt.data(), rows, cols, off, ls + hh * S + t0,
                                                        di + hh * S + t0, a.scale);
      if (crosses_window_edge(j0, t0, a.window)) {
        fill_outside_window(w.st.data(), rows, cols, j0, t0, a.window, false, 0.0f);
        fill_outside_window(w.dpt.data(), rows, cols, j0, t0, a.window, false, 0.0f);
      }
      tile_gemm(cols, D, rows, w.st.data(), 1, kB, dob, ldo, w.dvb.data(), D, true, nullptr, kv_trim);
      tile_gemm(cols, D, rows, w.dpt.data(), 1, kB, qb, ldq, w.dkb.data(), D, true, nullptr, kv_trim);
      tile_gemm(rows, D, cols, w.dpt.data(), kB, 1, kb, ldk, dq_base + (b * S + t0) * ldq + h * D, ldq, true,
                nullptr, q_trim);
    }
  }
  for (int64_t j = 0; j < cols; ++j) {
    float* dkr = a.dk + (b * S + j0 + j) * ldk + g * D;
    float* dvr = a.dv + (b * S + j0 + j) * ldk + g * D;
    const float* sk = w.dkb.data() + j * D;
    const float* sv = w.dvb.data() + j * D;
#pragma omp simd
    for (int64_t d = 0; d < D; ++d) {
      dkr[d] += sk[d];
      dvr[d] += sv[d];
    }
  }
}

}  // namespace

// Scheduling, fixed by the shape alone so that the bits do not depend on the thread count.
// Normally one task per (batch, kv head), all of the same cost: the task owns dQ of its
// query heads, so dQ goes straight into dq, key block after key block. When those pairs are
// too few to keep a large machine busy, each pair's key blocks are cut into `parts` ranges
// of equal work (key_parts, key_range_bounds); range 0 adds into dq, range r > 0 into its
// own zeroed copy of dq, and the copies are added to dq in range order at the end.
namespace {

constexpr int64_t kAttentionUnits = 64;                      // work units wanted per backward
constexpr int64_t kMaxDqCopyFloats = int64_t{64} << 20;      // dQ copies: 256 MiB at most

// Key-block ranges per (batch, kv head) pair: 1 when the pairs are enough units.
int64_t key_parts(int64_t pairs, int64_t k_blocks, int64_t dq_floats) {
  int64_t parts = std::min(k_blocks, (kAttentionUnits + pairs - 1) / pairs);
  if (dq_floats > 0) parts = std::min(parts, 1 + kMaxDqCopyFloats / dq_floats);
  return std::max<int64_t>(parts, 1);
}

// parts + 1 boundaries (in key blocks) of ranges of about equal work: key block j meets the
// k_blocks - j query blocks at or below the diagonal.
std::vector<int64_t> key_range_bounds(int64_t k_blocks, int64_t parts) {
  std::vector<int64_t> bounds{0};
  const int64_t total = k_blocks * (k_blocks + 1) / 2;
  int64_t done = 0;
  for (int64_t j = 0; j < k_blocks; ++j) {
    done += k_blocks - j;
    const int64_t r = static_cast<int64_t>(bounds.size());
    if (r < parts && done * parts >= r * total) bounds.push_back(j + 1);
  }
  bounds.push_back(k_blocks);
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  return bounds;
}

}  // namespace

void attention_backward_f32(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                            const float* v, const float* out, const float* lse, const AttentionShape& s,
                            const float* gate_score, float* dgate_score, GateGradLayout dgate_layout) {
  const int64_t D = s.head_dim, group = s.n_q / s.n_kv, S = s.seq;
  if (dgate_layout.ld == 0) dgate_layout.ld = s.n_q * D;
  const BackwardArgs a{dq, dk, dv, dout, q, k, v, out, lse, gate_score, dgate_score, dgate_layout,
                       s.batch, S, s.n_q, D, group, s.n_q * D, s.n_kv * D, static_cast<float>(s.scale), s.window, s.softpick};
  const int64_t tasks = s.batch * s.n_kv, k_blocks = (S + kB - 1) / kB;
  const int64_t per_head = group * S, dor_size = gate_score ? group * S * D : 0;
  const int64_t n = s.batch * S * s.n_q * D;
  const std::vector<int64_t> bounds = key_range_bounds(k_blocks, key_parts(tasks, k_blocks, n));
  const int64_t parts = static_cast<int64_t>(bounds.size()) - 1;
  if (parts <= 1) {
#pragma omp parallel
    {
      std::vector<float> dor(dor_size), di(per_head), ls(per_head);
      BackwardScratch w(D);
#pragma omp for collapse(2) schedule(dynamic, 1)
      for (int64_t b = 0; b < s.batch; ++b)
        for (int64_t g = 0; g < s.n_kv; ++g) {
          backward_prepass(a, b, g, di.data(), ls.data(), dor.data());
          for (int64_t j0 = 0; j0 < S; j0 += kB) backward_key_block(a, b, g, j0, di.data(), ls.data(), dor.data(), dq, w);
        }
    }
    return;
  }
  std::vector<float> dor(tasks * dor_size), di(tasks * per_head), ls(tasks * per_head), dq_copies((parts - 1) * n);
#pragma omp parallel
  {
    BackwardScratch w(D);
#pragma omp for schedule(static)
    for (int64_t task = 0; task < tasks; ++task)
      backward_prepass(a, task / s.n_kv, task % s.n_kv, di.data() + task * per_head, ls.data() + task * per_head,
                       dor.data() + task * dor_size);
#pragma omp for schedule(dynamic, 1)
    for (int64_t i = 0; i < tasks * parts; ++i) {  // range major: the ranges cost about the same
      const int64_t range = i / tasks, task = i % tasks;
      float* dq_range = range == 0 ? dq : dq_copies.data() + (range - 1) * n;
      for (int64_t blk = bounds[range]; blk < bounds[range + 1]; ++blk)
        backward_key_block(a, task / s.n_kv, task % s.n_kv, blk * kB, di.data() + task * per_head,
                           ls.data() + task * per_head, dor.data() + task * dor_size, dq_range, w);
    }
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      float sum = dq[i];
      for (int64_t r = 0; r + 1 < parts; ++r) sum += dq_copies[r * n + i];
      dq[i] = sum;
    }
  }
}

}  // namespace gatedlm::kernels::GATEDLM_KSET

#include "kernels/kernel_set_end.h"
