#include "kernels/attention_decode.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/error.h"
#include "kernels/half_float.h"

namespace gatedlm::kernels {

namespace {

// Value e of a cached row as the arithmetic type: itself, an F16 value widened to fp32, or
// a Q8_0 value d * q (exact in fp32).
template <typename T>
T cached_value(const T* row, int64_t e) {
  return row[e];
}
float cached_value(const uint16_t* row, int64_t e) { return f16_to_f32(row[e]); }
float cached_value(const BlockQ8_0* row, int64_t e) {
  const BlockQ8_0& b = row[e / kQuantBlockValues];
  return f16_to_f32(b.d) * static_cast<float>(b.qs[e % kQuantBlockValues]);
}

}  // namespace

template <typename T, typename S>
std::vector<int64_t> decode_rows_checked(std::span<const DecodeQuery<T, S>> queries, const DecodeShape& s) {
  if (s.n_kv < 1 || s.n_q < 1 || s.n_q % s.n_kv != 0)
    fail("attention_decode: ", s.n_q, " query heads over ", s.n_kv, " kv heads");
  if (s.head_dim < 1) fail("attention_decode: head_dim ", s.head_dim);
  if (std::is_same_v<S, BlockQ8_0> && s.head_dim % kQuantBlockValues != 0)
    fail("attention_decode: Q8_0 rows of head_dim ", s.head_dim, ", not a multiple of ", kQuantBlockValues);
  std::vector<int64_t> rows;
  rows.reserve(queries.size());
  for (const DecodeQuery<T, S>& q : queries) {
    int64_t n = 0;
    for (const KvSpan<S>& sp : q.spans) {
      if (sp.len < 0) fail("attention_decode: a span of ", sp.len, " rows");
      if (std::is_same_v<S, BlockQ8_0> && (sp.k_layout.row_stride == 0 || sp.v_layout.row_stride == 0))
        fail("attention_decode: a span of Q8_0 rows without its strides in blocks");
      n += sp.len;
    }
    if (n < 1) fail("attention_decode: a query with no keys");
    if (q.gate_score && !q.gated_out) fail("attention_decode: a gate score without a gated output");
    rows.push_back(n);
  }
  return rows;
}

template <typename T, typename S>
void attention_decode_portable(std::span<const DecodeQuery<T, std::type_identity_t<S>>> queries, const DecodeShape& s) {
  const std::vector<int64_t> rows_of = decode_rows_checked(queries, s);
  const int64_t nq = static_cast<int64_t>(queries.size()), D = s.head_dim, group = s.n_q / s.n_kv;
  // Two passes per (query, head): scores into a per-task buffer, then the weighted sum
  // of values. Each query head reads its kv head's cached keys and values itself.
#pragma omp parallel
  {
    std::vector<T> scores;
#pragma omp for collapse(2) schedule(dynamic, 1)
    for (int64_t i = 0; i < nq; ++i)
      for (int64_t h = 0; h < s.n_q; ++h) {
        const DecodeQuery<T, S>& query = queries[i];
        const T* q = query.q + h * D;
        const int64_t kvh = h / group, rows = rows_of[i];
        scores.resize(rows);
        const T scale = static_cast<T>(s.scale);
        // A sink logit is a score with no value: it starts the maximum and the sum. Softpick's
        // maximum starts at 0 (attention.h).
        T m = query.sinks ? query.sinks[h] : s.softpick ? T(0) : -INFINITY;
        int64_t r = 0;
        for (const KvSpan<S>& sp : query.spans)
          for (int64_t j = 0; j < sp.len; ++j, ++r) {
            const S* k = sp.k + sp.k_layout.at(j, kvh, s.n_kv, D);
            T dot = 0;
#pragma omp simd reduction(+ : dot)
            for (int64_t e = 0; e < D; ++e) dot += q[e] * cached_value(k, e);
            scores[r] = dot * scale;
            m = std::max(m, scores[r]);
          }
        T sum = query.sinks ? std::exp(query.sinks[h] - m) : T(0);
        const T below = s.softpick ? std::exp(-m) : T(0);
        for (int64_t j = 0; j < rows; ++j) {
          scores[j] = std::exp(scores[j] - m) - below;
          sum += std::abs(scores[j]);
          scores[j] = std::max(scores[j], T(0));
        }
        T* out = query.out + h * D;
        std::fill_n(out, D, T(0));
        r = 0;
        for (const KvSpan<S>& sp : query.spans)
          for (int64_t j = 0; j < sp.len; ++j, ++r) {
            const S* v = sp.v + sp.v_layout.at(j, kvh, s.n_kv, D);
            const T p = scores[r];
#pragma omp simd
            for (int64_t e = 0; e < D; ++e) out[e] += p * cached_value(v, e);
          }
        const T inv = sum > 0 ? T(1) / sum : T(0);
        for (int64_t e = 0; e < D; ++e) out[e] *= inv;
        if (query.gate_score)
          for (int64_t e = 0; e < D; ++e) query.gated_out[h * D + e] = out[e] * query.gate_score[h * D + e];
      }
  }
}

template <>
void attention_decode<double>(std::span<const DecodeQuery<double>> queries, const DecodeShape& s) {
  attention_decode_portable(queries, s);
}

template std::vector<int64_t> decode_rows_checked<float>(std::span<const DecodeQuery<float>>, const DecodeShape&);
template std::vector<int64_t> decode_rows_checked<float, uint16_t>(std::span<const DecodeQuery<float, uint16_t>>,
                                                                   const DecodeShape&);
template std::vector<int64_t> decode_rows_checked<float, BlockQ8_0>(std::span<const DecodeQuery<float, BlockQ8_0>>,
                                                                    const DecodeShape&);
template std::vector<int64_t> decode_rows_checked<double>(std::span<const DecodeQuery<double>>, const DecodeShape&);
template void attention_decode_portable<float>(std::span<const DecodeQuery<float>>, const DecodeShape&);
template void attention_decode_portable<float, uint16_t>(std::span<const DecodeQuery<float, uint16_t>>,
                                                         const DecodeShape&);
template void attention_decode_portable<float, BlockQ8_0>(std::span<const DecodeQuery<float, BlockQ8_0>>,
                                                          const DecodeShape&);
template void attention_decode_portable<double>(std::span<const DecodeQuery<double>>, const DecodeShape&);

}  // namespace gatedlm::kernels
