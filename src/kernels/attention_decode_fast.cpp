// The float decode attention of attention_decode.h, compiled once per kernel set.
//
// One task per (query, kv head): the `group` query heads that share the kv head go
// through its cached rows together, up to four at a time (their partial sums fit in
// registers), so a key or value row is read once per group instead of once per head.
// Per block of G heads, R rows:
//   scores[g][r] = scale <q_g, k_r>      a key row loaded once, against every head's query
//   p[g][r] = exp(scores[g][r] - max_g)  whole vectors (exp_approx; libm in the generic set)
//   out_g = sum_r p[g][r] v_r / sum_g    a value row loaded once, into every head's sums
// A task's arithmetic is its own, and whole tasks go to threads (by a split of their
// sizes, so that caches of different lengths share out evenly): the bits of every output
// do not depend on the thread count. Rows cached in F16 or Q8_0 are widened to fp32 as they
// are loaded (F16C's conversion on AVX2 and AVX-512; a Q8_0 block's int8 values times its
// scale, exact); the rest is the same code.
#include <cmath>
#include <omp.h>

#include <span>
#include <type_traits>
#include <vector>

#include "kernels/attention_decode.h"
#include "kernels/half_float.h"
#include "kernels/kernel_sets.h"

#include "kernels/kernel_set_begin.h"
#include "kernels/fast_math.h"

namespace gatedlm::kernels::GATEDLM_KSET {

namespace {

// The vector operations the kernel is written in, for this set: kWidth floats per
// vector. Parts (n <= kWidth lanes) read and write only their first n lanes.
#if GATEDLM_KSET_AVX512
struct Lanes {
  static constexpr int kWidth = 16;
  using V = __m512;
  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static V load_part(const float* p, int64_t n) { return _mm512_maskz_loadu_ps(tail_mask(n), p); }
  // F16 rows widened (the zero-masked form: GCC 12 warns of the plain one's undefined source).
  static V load(const uint16_t* p) { return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static V load_part(const uint16_t* p, int64_t n) { return widen(_mm256_maskz_loadu_epi16(tail_mask(n), p)); }
  static V widen(__m256i half) { return _mm512_maskz_cvtph_ps(__mmask16(0xFFFF), half); }
  // 16 int8 values of a Q8_0 block times its scale (zero-masked forms, as widen's).
  static V widen_q8(const int8_t* q, float d) {
    const __m512i ints = _mm512_maskz_cvtepi8_epi32(__mmask16(0xFFFF), _mm_loadu_si128(reinterpret_cast<const __m128i*>(q)));
    return mul(_mm512_maskz_cvtepi32_ps(__mmask16(0xFFFF), ints), set1(d));
  }
  static float scale_of(uint16_t d) { return _cvtsh_ss(d); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static void store_part(float* p, V v, int64_t n) { _mm512_mask_storeu_ps(p, tail_mask(n), v); }
  static V keep(V v, int64_t n) { return _mm512_maskz_mov_ps(tail_mask(n), v); }  // other lanes 0
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V max(V a, V b) { return _mm512_mask_max_ps(a, __mmask16(0xFFFF), a, b); }
  static V exp(V x) { return exp_approx16(x); }
  static float sum(V v) { return halving_sum16(v); }
  // out[0..3] = scale * (the lane sums of a, b, c, d): halves, quarters, then within the
  // 128-bit lanes (masked forms with a pass-through: see halving_sum16).
  static void sum4(V a, V b, V c, V d, float scale, float* out) {
    const __mmask16 all = 0xFFFF;
    // Lanes 0-7: a's lanes i + (i + 8); lanes 8-15: b's. Likewise c and d.
    const V ab = add(_mm512_mask_shuffle_f32x4(a, all, a, b, 0x44), _mm512_mask_shuffle_f32x4(a, all, a, b, 0xEE));
    const V cd = add(_mm512_mask_shuffle_f32x4(c, all, c, d, 0x44), _mm512_mask_shuffle_f32x4(c, all, c, d, 0xEE));
    // 128-bit lane k: the four quarter sums of a, b, c, d (k = 0..3).
    V q = add(_mm512_mask_shuffle_f32x4(ab, all, ab, cd, 0x88), _mm512_mask_shuffle_f32x4(ab, all, ab, cd, 0xDD));
    q = add(q, _mm512_shuffle_ps(q, q, 0x4E));
    q = add(q, _mm512_shuffle_ps(q, q, 0xB1));  // lanes 0, 4, 8, 12: the sums
    const V sums = _mm512_mask_permutexvar_ps(q, all, _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), q);
    _mm512_mask_storeu_ps(out, 0x000F, mul(sums, set1(scale)));
  }
  static float max_of(V v) { return max16(v); }
};
#elif GATEDLM_KSET_AVX2
struct Lanes {
  static constexpr int kWidth = 8;
  using V = __m256;
  static __m256i mask(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::min<int64_t>(n, 8))),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static V load_part(const float* p, int64_t n) { return _mm256_maskload_ps(p, mask(n)); }
  static V load(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static V load_part(const uint16_t* p, int64_t n) {  // no masked 16-bit load before AVX-512
    alignas(16) uint16_t part[8] = {};
    std::copy_n(p, std::min<int64_t>(n, 8), part);
    return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(part)));
  }
  // 8 int8 values of a Q8_0 block times its scale.
  static V widen_q8(const int8_t* q, float d) {
    return mul(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q)))), set1(d));
  }
  static float scale_of(uint16_t d) { return _cvtsh_ss(d); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static void store_part(float* p, V v, int64_t n) { _mm256_maskstore_ps(p, mask(n), v); }
  static V keep(V v, int64_t n) { return _mm256_and_ps(v, _mm256_castsi256_ps(mask(n))); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  static V exp(V x) { return exp_approx8(x); }
  static float sum(V v) { return sum8(v); }
  // out[0..3] = scale * (the lane sums of a, b, c, d): pairs, quads ([a0..3, b0..3, c0..3,
  // d0..3 | a4..7, ..]), then the two halves.
  static void sum4(V a, V b, V c, V d, float scale, float* out) {
    const __m256 abcd = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    const __m128 sums = _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
    _mm_storeu_ps(out, _mm_mul_ps(sums, _mm_set1_ps(scale)));
  }
  static float max_of(V v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
  }
};
#else
// The baseline target (SSE on x86-64, whatever the compiler maps it to elsewhere): GCC's
// vector extension, four lanes.
struct Lanes {
  static constexpr int kWidth = 4;
  typedef float V __attribute__((vector_size(16)));
  static V zero() { return V{}; }
  static V set1(float x) { return V{x, x, x, x}; }
  static V load(const float* p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static V load_part(const float* p, int64_t n) {
    V v{};
    for (int64_t i = 0; i < n && i < 4; ++i) v[i] = p[i];
    return v;
  }
  static V load(const uint16_t* p) { return load_part(p, 4); }
  static V load_part(const uint16_t* p, int64_t n) {  // scalar: x86-64-v2 has no F16C
    V v{};
    for (int64_t i = 0; i < n && i < 4; ++i) v[i] = f16_to_f32(p[i]);
    return v;
  }
  static V widen_q8(const int8_t* q, float d) {
    return V{q[0] * d, q[1] * d, q[2] * d, q[3] * d};
  }
  static float scale_of(uint16_t d) { return f16_to_f32(d); }
  static void store(float* p, V v) { std::memcpy(p, &v, sizeof v); }
  static void store_part(float* p, V v, int64_t n) {
    for (int64_t i = 0; i < n && i < 4; ++i) p[i] = v[i];
  }
  static V keep(V v, int64_t n) {
    for (int64_t i = n; i < 4; ++i) v[i] = 0.0f;
    return v;
  }
  static V add(V a, V b) { return a + b; }
  static V sub(V a, V b) { return a - b; }
  static V mul(V a, V b) { return a * b; }
  static V fma(V a, V b, V c) { return a * b + c; }
  static V max(V a, V b) { return V{std::max(a[0], b[0]), std::max(a[1], b[1]), std::max(a[2], b[2]), std::max(a[3], b[3])}; }
  // libm's expf: exp_approx's std::fma is a library call where the target has no FMA.
  static V exp(V x) { return V{std::exp(x[0]), std::exp(x[1]), std::exp(x[2]), std::exp(x[3])}; }
  static float sum(V v) { return (v[0] + v[1]) + (v[2] + v[3]); }
  static void sum4(V a, V b, V c, V d, float scale, float* out) {
    for (const V& v : {a, b, c, d}) *out++ = sum(v) * scale;
  }
  static float max_of(V v) { return std::max(std::max(v[0], v[1]), std::max(v[2], v[3])); }
};
#endif

using V = Lanes::V;
constexpr int64_t W = Lanes::kWidth;
static_assert(kQuantBlockValues % W == 0, "a vector of a Q8_0 row lies in one block");

// Values [e, e + W) of a cached row as fp32, e a multiple of W (row_part: the first n of
// them). Q8_0 rows have head_dim a multiple of 32 (decode_rows_checked), so they never
// take the part, which converts value by value.
inline V load_row(const float* row, int64_t e) { return Lanes::load(row + e); }
inline V load_row(const uint16_t* row, int64_t e) { return Lanes::load(row + e); }
inline V load_row(const BlockQ8_0* row, int64_t e) {
  const BlockQ8_0& b = row[e / kQuantBlockValues];
  return Lanes::widen_q8(b.qs + e % kQuantBlockValues, Lanes::scale_of(b.d));
}
template <typename S>
inline V load_row_part(const S* row, int64_t e, int64_t n) {
  if constexpr (std::is_same_v<S, BlockQ8_0>) {
    float values[W] = {};
    for (int64_t i = 0; i < n && i < W; ++i) {
      const BlockQ8_0& b = row[(e + i) / kQuantBlockValues];
      values[i] = f16_to_f32(b.d) * static_cast<float>(b.qs[(e + i) % kQuantBlockValues]);
    }
    return Lanes::load(values);
  } else {
    return Lanes::load_part(row + e, n);
  }
}

// What one block of G query heads reads and writes: heads `head`.. of the query, over R
// rows whose key and value columns (of their kv head) start at keys[r] and values[r], of
// element type S (float, F16 bits or Q8_0 blocks).
template <typename S>
struct HeadBlock {
  const DecodeQuery<float, S>* query;
  int64_t head, D, rows;
  const S* const* keys;
  const S* const* values;
};

// Requests for the lines 4 KiB past rows r..r+N-1 (the rows kernels' distance in
// quant_matmul): a head-major cache's rows of a task are one contiguous block, and the
// hardware's prefetcher alone kept the kernel at about half the products' read rate (f32 and
// F16 rows at 1900 positions of the 1B shape, 1.3-1.6x faster with them on Zen 5: bench/RESULTS.md,
// "A Q8_0 KV cache"). Not for Q8_0 rows, whose widening bounds the kernel before its reads do
// (the requests made it up to 1.3x slower with the avx2 set). Where rows are not contiguous
// (sink keys, several spans), a request is wasted, not wrong.
constexpr int64_t kRequestAhead = 4096;
template <int N, typename S>
inline __attribute__((always_inline)) void request_ahead(const S* const* rows, int64_t r, int64_t D) {
  if constexpr (!std::is_same_v<S, BlockQ8_0>) {
    const char* at = reinterpret_cast<const char*>(rows[r]) + kRequestAhead;
    for (int64_t line = 0; line < N * D * static_cast<int64_t>(sizeof(S)); line += 64) __builtin_prefetch(at + line);
  }
}

// scores[g * R + r + n] = scale <q_{head+g}, k_{r+n}> for the N rows r..: a key vector
// loaded once for the G heads, a query vector once for the N rows, and the N x G sums
// reduced four rows at a time. (Software prefetches of the value rows and of the next
// keys here measured no faster while the cache was row-major, each row of a kv head 4 KiB
// apart; head-major, requests 4 KiB ahead do: request_ahead.)
template <int G, int N, typename S>
inline __attribute__((always_inline)) void score_rows(const HeadBlock<S>& b, float scale, float* scores, int64_t r) {
  const float* q = b.query->q + b.head * b.D;
  const int64_t D = b.D, R = b.rows;
  V acc[N][G];
  request_ahead<N>(b.keys, r, D);
  for (int n = 0; n < N; ++n)
    for (int g = 0; g < G; ++g) acc[n][g] = Lanes::zero();
  int64_t e = 0;
  for (; e + W <= D; e += W) {
    V qv[G];
    for (int g = 0; g < G; ++g) qv[g] = Lanes::load(q + g * D + e);
    for (int n = 0; n < N; ++n) {
      const V kv = load_row(b.keys[r + n], e);
      for (int g = 0; g < G; ++g) acc[n][g] = Lanes::fma(qv[g], kv, acc[n][g]);
    }
  }
  if (e < D) {
    V qv[G];
    for (int g = 0; g < G; ++g) qv[g] = Lanes::load_part(q + g * D + e, D - e);
    for (int n = 0; n < N; ++n) {
      const V kv = load_row_part(b.keys[r + n], e, D - e);
      for (int g = 0; g < G; ++g) acc[n][g] = Lanes::fma(qv[g], kv, acc[n][g]);
    }
  }
  for (int g = 0; g < G; ++g) {
    if constexpr (N == 4)
      Lanes::sum4(acc[0][g], acc[1][g], acc[2][g], acc[3][g], scale, scores + g * R + r);
    else
      for (int n = 0; n < N; ++n) scores[g * R + r + n] = Lanes::sum(acc[n][g]) * scale;
  }
}

template <int G, typename S>
void block_scores(const HeadBlock<S>& b, float scale, float* scores) {
  int64_t r = 0;
  for (; r + 4 <= b.rows; r += 4) score_rows<G, 4>(b, scale, scores, r);
  for (; r < b.rows; ++r) score_rows<G, 1>(b, scale, scores, r);
}

// p = exp(s - max(s, sink)) in place over n scores; returns 1 / (sum(p) + exp(sink - max)).
// sink: the head's learned sink logit (a score without a value), -infinity for none.
float softmax_weights(float* s, int64_t n, float sink) {
  V mv = Lanes::set1(sink);
  int64_t r = 0;
  for (; r + W <= n; r += W) mv = Lanes::max(mv, Lanes::load(s + r));
  float m = Lanes::max_of(mv);
  for (int64_t t = r; t < n; ++t) m = std::max(m, s[t]);
  const V mb = Lanes::set1(m);
  V sum = Lanes::zero();
  for (r = 0; r + W <= n; r += W) {
    const V p = Lanes::exp(Lanes::sub(Lanes::load(s + r), mb));
    Lanes::store(s + r, p);
    sum = Lanes::add(sum, p);
  }
  if (r < n) {
    const V p = Lanes::keep(Lanes::exp(Lanes::sub(Lanes::load_part(s + r, n - r), mb)), n - r);
    Lanes::store_part(s + r, p, n - r);
    sum = Lanes::add(sum, p);
  }
  return 1.0f / (Lanes::sum(sum) + (sink == -INFINITY ? 0.0f : std::exp(sink - m)));
}

// sums[g * D + e] += sum over the N rows r.. of p[g * R + r] v_r[e]. The sums live in L1,
// one load and store per N multiply-adds: a single pass over each value row, whatever D
// (register tiles of columns would walk the rows once per tile, and a long cache's rows
// fall out of L1 and L2 between two walks).
template <int G, int N, typename S>
inline __attribute__((always_inline)) void accumulate_rows(float* sums, const HeadBlock<S>& b, const float* p,
                                                           int64_t r) {
  const int64_t D = b.D, R = b.rows;
  V pr[G][N];
  request_ahead<N>(b.values, r, D);
  for (int g = 0; g < G; ++g)
    for (int n = 0; n < N; ++n) pr[g][n] = Lanes::set1(p[g * R + r + n]);
  int64_t e = 0;
  for (; e + W <= D; e += W) {
    V v[N];
    for (int n = 0; n < N; ++n) v[n] = load_row(b.values[r + n], e);
    for (int g = 0; g < G; ++g) {
      V acc = Lanes::load(sums + g * D + e);
      for (int n = 0; n < N; ++n) acc = Lanes::fma(pr[g][n], v[n], acc);
      Lanes::store(sums + g * D + e, acc);
    }
  }
  if (e < D) {
    V v[N];
    for (int n = 0; n < N; ++n) v[n] = load_row_part(b.values[r + n], e, D - e);
    for (int g = 0; g < G; ++g) {
      V acc = Lanes::load_part(sums + g * D + e, D - e);
      for (int n = 0; n < N; ++n) acc = Lanes::fma(pr[g][n], v[n], acc);
      Lanes::store_part(sums + g * D + e, acc, D - e);
    }
  }
}

// out_g = inv[g] sum_r p[g * R + r] v_r, and the gated output; sums is G * D floats.
template <int G, typename S>
void block_values(const HeadBlock<S>& b, const float* p, const float* inv, float* sums) {
  const int64_t D = b.D, R = b.rows;
  std::fill_n(sums, G * D, 0.0f);
  int64_t r = 0;
  for (; r + 4 <= R; r += 4) accumulate_rows<G, 4>(sums, b, p, r);
  for (; r < R; ++r) accumulate_rows<G, 1>(sums, b, p, r);
  const DecodeQuery<float, S>& query = *b.query;
  for (int g = 0; g < G; ++g) {
    const int64_t at = (b.head + g) * D;
    const V scale = Lanes::set1(inv[g]);
    for (int64_t e = 0; e < D; e += W) {
      const int64_t n = std::min(W, D - e);
      const V o = Lanes::mul(Lanes::load_part(sums + g * D + e, n), scale);
      Lanes::store_part(query.out + at + e, o, n);
      if (query.gate_score)
        Lanes::store_part(query.gated_out + at + e, Lanes::mul(o, Lanes::load_part(query.gate_score + at + e, n)), n);
    }
  }
}

// A task's scratch, kept by its thread from task to task.
template <typename S>
struct Scratch {
  std::vector<const S*> keys, values;      // [R]: the rows' columns of the task's kv head
  std::vector<float> scores, sums;         // [G, R] and [G, D] for a block of G heads
};

constexpr int64_t kMaxBlock = 4;  // heads per block: their query vectors stay in registers

// Softpick's weights relu(e^(s-m) - e^-m), m = max(0, max s), in place; returns 1 / sum of
// |e^(s-m) - e^-m| (0 when that is 0: no weights). Scalar: decode reads the cache, not this.
float softpick_weights(float* s, int64_t n) {
  float m = 0.0f;
  for (int64_t r = 0; r < n; ++r) m = std::max(m, s[r]);
  const float below = std::exp(-m);
  float sum = 0.0f;
  for (int64_t r = 0; r < n; ++r) {
    const float e = std::exp(s[r] - m) - below;
    sum += std::abs(e);
    s[r] = std::max(e, 0.0f);
  }
  return sum > 0.0f ? 1.0f / sum : 0.0f;
}

template <int G, typename S>
void head_block(const HeadBlock<S>& b, float scale, bool softpick, Scratch<S>& t) {
  block_scores<G>(b, scale, t.scores.data());
  float inv[G];
  for (int g = 0; g < G; ++g) {
    const float sink = b.query->sinks ? b.query->sinks[b.head + g] : -INFINITY;
    float* scores = t.scores.data() + g * b.rows;
    inv[g] = softpick ? softpick_weights(scores, b.rows) : softmax_weights(scores, b.rows, sink);
  }
  block_values<G>(b, t.scores.data(), inv, t.sums.data());
}

// Query i's heads that read kv head kvh, in blocks of up to kMaxBlock.
template <typename S>
void decode_task(const DecodeQuery<float, S>& query, int64_t rows, int64_t kvh, const DecodeShape& s, Scratch<S>& t) {
  const int64_t group = s.n_q / s.n_kv, D = s.head_dim;
  t.keys.clear();
  t.values.clear();
  for (const KvSpan<S>& sp : query.spans)
    for (int64_t j = 0; j < sp.len; ++j) {
      t.keys.push_back(sp.k + sp.k_layout.at(j, kvh, s.n_kv, D));
      t.values.push_back(sp.v + sp.v_layout.at(j, kvh, s.n_kv, D));
    }
  t.scores.resize(static_cast<size_t>(std::min(group, kMaxBlock) * rows));
  t.sums.resize(static_cast<size_t>(std::min(group, kMaxBlock) * D));
  const float scale = static_cast<float>(s.scale);
  for (int64_t g0 = 0; g0 < group; g0 += kMaxBlock) {
    const HeadBlock<S> b{&query, kvh * group + g0, D, rows, t.keys.data(), t.values.data()};
    switch (std::min(group - g0, kMaxBlock)) {
      case 1: head_block<1>(b, scale, s.softpick, t); break;
      case 2: head_block<2>(b, scale, s.softpick, t); break;
      case 3: head_block<3>(b, scale, s.softpick, t); break;
      default: head_block<4>(b, scale, s.softpick, t); break;
    }
  }
}

// Below this many multiply-adds in all, one thread does the whole step (a parallel
// region's start and join would cost more than it shares out).
constexpr int64_t kParallelWork = int64_t{1} << 16;

template <typename S>
void decode_queries(std::span<const DecodeQuery<float, S>> queries, const DecodeShape& s) {
  const std::vector<int64_t> rows = decode_rows_checked(queries, s);
  const int64_t nq = static_cast<int64_t>(queries.size());
  if (nq == 0) return;
  int64_t total = 0;  // the tasks' sizes: rows, each task the same heads
  for (int64_t r : rows) total += r * s.n_kv;
  const bool parallel = total * (s.n_q / s.n_kv) * s.head_dim * 2 >= kParallelWork;
#pragma omp parallel if (parallel)
  {
    // Task (i, kvh) goes to the thread whose share of the total size holds its middle.
    const int64_t threads = omp_get_num_threads(), me = omp_get_thread_num();
    Scratch<S> scratch;
    const int64_t most_rows = *std::max_element(rows.begin(), rows.end());
    scratch.keys.reserve(static_cast<size_t>(most_rows));
    scratch.values.reserve(static_cast<size_t>(most_rows));
    int64_t before = 0;
    for (int64_t i = 0; i < nq; ++i)
      for (int64_t kvh = 0; kvh < s.n_kv; before += rows[i], ++kvh)
        if (std::min(threads - 1, (2 * before + rows[i]) * threads / (2 * total)) == me)
          decode_task(queries[i], rows[i], kvh, s, scratch);
  }
}

}  // namespace

void attention_decode_f32(std::span<const DecodeQuery<float>> queries, const DecodeShape& s) {
  decode_queries(queries, s);
}
void attention_decode_f32(std::span<const DecodeQuery<float, uint16_t>> queries, const DecodeShape& s) {
  decode_queries(queries, s);
}
void attention_decode_f32(std::span<const DecodeQuery<float, BlockQ8_0>> queries, const DecodeShape& s) {
  decode_queries(queries, s);
}

}  // namespace gatedlm::kernels::GATEDLM_KSET

#include "kernels/kernel_set_end.h"
