// The decode attention kernel (kernels/attention_decode.h) against a naive fp64 softmax
// attention, in every kernel set this CPU runs and in the double path: GQA groups of 1 to
// 5 query heads per kv head (5 takes a block of four and one of one), head_dim 64, 128 and
// odd ones (tails of every vector width), queries whose rows lie in one or several spans,
// caches of one row and of many, with and without the gate, with and without learned sink
// logits (a softmax column without a value, kernels/attention_sinks.h), with the rows in
// their own order and in the KV cache's, each kv head's rows together (KvLayout); and over
// rows kept in F16 or Q8_0 (infer's --kv-type f16 / q8_0), against the same reference on the
// rounded rows.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "kernels/attention_decode.h"
#include "kernels/element_types.h"
#include "kernels/half_float.h"
#include "kernels/kernel_set.h"
#include "test_util.h"

namespace gatedlm::kernels {
namespace {

using testing::random_vector;
using testing::rel_error;

struct Case {
  int64_t group, n_kv, head_dim;
  std::vector<std::vector<int64_t>> spans;  // per query, the lengths of its spans
};

std::string name(const Case& c) {
  std::string out = "group " + std::to_string(c.group) + " kv " + std::to_string(c.n_kv) + " d " +
                    std::to_string(c.head_dim) + " spans";
  for (const auto& q : c.spans) {
    out += " [";
    for (int64_t len : q) out += " " + std::to_string(len);
    out += " ]";
  }
  return out;
}

// How the kernel gets the rows: row-major [rows, n_kv, D] (KvLayout's zeros), head-major
// [n_kv, rows, D] for keys and values, or head-major keys with row-major values (the
// decoder's moved sink keys beside the cache's values differ in their head strides).
enum class Layout { rows, heads, heads_keys_only };

// The inputs of one case in T: each query's spans are slices of one cache [rows, n_kv, D]
// of its own (keys, values: what the reference reads), taken out of order (the kernel may
// not assume the rows are contiguous), and handed to the kernel in the layout asked for.
template <typename T>
struct Inputs {
  std::vector<std::vector<T>> keys, values;
  std::vector<std::vector<T>> head_keys, head_values;  // the same, [n_kv, rows, D]
  std::vector<T> q, gate, sinks;  // sinks [n_q], empty without
  std::vector<T> out, gated;
  std::vector<DecodeQuery<T>> queries;
};

// x [rows, n_kv, D] as [n_kv, rows, D].
template <typename T>
std::vector<T> heads_first(const std::vector<T>& x, int64_t n_kv, int64_t D) {
  const int64_t rows = static_cast<int64_t>(x.size()) / (n_kv * D);
  std::vector<T> out(x.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < n_kv; ++h)
      for (int64_t e = 0; e < D; ++e) out[(h * rows + r) * D + e] = x[(r * n_kv + h) * D + e];
  return out;
}

template <typename T>
Inputs<T> make_inputs(const Case& c, bool gated, uint64_t seed, bool sinks = false, Layout layout = Layout::rows) {
  const int64_t n_q = c.group * c.n_kv, D = c.head_dim, width = n_q * D, nq = static_cast<int64_t>(c.spans.size());
  Inputs<T> in;
  in.q = random_vector<T>(nq * width, seed, 1.5);
  in.gate = random_vector<T>(nq * width, seed + 1);
  if (sinks) in.sinks = random_vector<T>(n_q, seed + 2, 2.0);
  in.out.assign(nq * width, T(-7));
  in.gated.assign(nq * width, T(-7));
  for (int64_t i = 0; i < nq; ++i) {
    int64_t rows = 0;
    for (int64_t len : c.spans[i]) rows += len;
    in.keys.push_back(random_vector<T>(rows * c.n_kv * D, seed + 10 + 2 * i, 1.5));
    in.values.push_back(random_vector<T>(rows * c.n_kv * D, seed + 11 + 2 * i));
    in.head_keys.push_back(heads_first(in.keys.back(), c.n_kv, D));
    in.head_values.push_back(heads_first(in.values.back(), c.n_kv, D));
  }
  for (int64_t i = 0; i < nq; ++i) {
    DecodeQuery<T> dq{in.q.data() + i * width, in.out.data() + i * width, gated ? in.gate.data() + i * width : nullptr,
                      gated ? in.gated.data() + i * width : nullptr, {}, sinks ? in.sinks.data() : nullptr};
    // Spans listed last slice first.
    const int64_t rows = static_cast<int64_t>(in.keys[i].size()) / (c.n_kv * D);
    const KvLayout head_major{D, rows * D};
    int64_t end = rows;
    for (int64_t len : c.spans[i]) {
      end -= len;
      KvSpan<T> sp{in.keys[i].data() + end * c.n_kv * D, in.values[i].data() + end * c.n_kv * D, len};
      if (layout != Layout::rows) sp.k = in.head_keys[i].data() + end * D, sp.k_layout = head_major;
      if (layout == Layout::heads) sp.v = in.head_values[i].data() + end * D, sp.v_layout = head_major;
      dq.spans.push_back(sp);
    }
    in.queries.push_back(dq);
  }
  return in;
}

// softmax(scale q k^T) v per query and head, in double, straight from the definition over
// every row of the query's row-major cache (its spans cover it); with sinks, each head's
// sink logit joins the denominator.
template <typename T>
std::vector<double> naive_attention(const Inputs<T>& in, const Case& c, double scale) {
  const int64_t n_q = c.group * c.n_kv, D = c.head_dim;
  std::vector<double> out;
  for (size_t i = 0; i < in.queries.size(); ++i)
    for (int64_t h = 0; h < n_q; ++h) {
      const DecodeQuery<T>& dq = in.queries[i];
      const int64_t col = h / c.group * D, rows = static_cast<int64_t>(in.keys[i].size()) / (c.n_kv * D);
      std::vector<double> score;
      std::vector<const T*> value;
      for (int64_t j = 0; j < rows; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < D; ++e) dot += double(dq.q[h * D + e]) * in.keys[i][j * c.n_kv * D + col + e];
        score.push_back(scale * dot);
        value.push_back(in.values[i].data() + j * c.n_kv * D + col);
      }
      double m = dq.sinks ? double(dq.sinks[h]) : -INFINITY;
      for (double s : score) m = std::max(m, s);
      double sum = dq.sinks ? std::exp(double(dq.sinks[h]) - m) : 0.0;
      for (double& s : score) sum += (s = std::exp(s - m));
      for (int64_t e = 0; e < D; ++e) {
        double o = 0;
        for (size_t r = 0; r < score.size(); ++r) o += score[r] * value[r][e];
        out.push_back(o / sum);
      }
    }
  return out;
}

std::vector<Case> cases() {
  std::vector<Case> out;
  const std::vector<std::vector<std::vector<int64_t>>> span_sets = {
      {{1}},                               // one query, one row
      {{37}, {1}, {80}},                   // several queries, one span each
      {{4, 33}, {16, 1, 47}, {2, 0, 3}},  // several spans per query (one empty)
  };
  for (int64_t group : {1, 2, 3, 4, 5})
    for (int64_t D : {64, 128, 37, 8})
      for (const auto& spans : span_sets) out.push_back({group, group == 5 ? 1 : 2, D, spans});
  return out;
}

TEST(AttentionDecodeTest, FloatMatchesNaiveFp64InEveryKernelSet) {
  const KernelSet keep = active_kernel_set();
  for (KernelSet set : runnable_kernel_sets()) {
    use_kernel_set(set);
    uint64_t seed = 100;
    for (const Case& c : cases())
      for (int variant = 0; variant < 3; ++variant) {  // plain, gated, gated with sinks
        const bool gated = variant > 0;
        const double scale = 1.0 / std::sqrt(double(c.head_dim));
        Inputs<float> in = make_inputs<float>(c, gated, seed += 50, variant == 2);
        attention_decode<float>(in.queries, {c.group * c.n_kv, c.n_kv, c.head_dim, scale});
        const std::vector<double> want = naive_attention(in, c, scale);
        EXPECT_LT(rel_error(in.out, want), 2e-6) << kernel_set_name(set) << ", " << name(c);
        for (size_t i = 0; i < in.out.size(); ++i) {
          ASSERT_LT(std::abs(in.out[i] - want[i]), 1e-5 * (1 + std::abs(want[i])))
              << kernel_set_name(set) << ", " << name(c) << " at " << i;
          // The gated output is exactly the product (or untouched without a gate).
          ASSERT_EQ(in.gated[i], gated ? in.out[i] * in.gate[i] : -7.0f) << kernel_set_name(set) << ", " << name(c);
        }
      }
  }
  use_kernel_set(keep);
}

// The rows in the cache's head-major order give the bits of the rows in their own order:
// the layout changes where a row is read, not the arithmetic.
TEST(AttentionDecodeTest, FloatGivesTheSameBitsInEveryLayout) {
  const KernelSet keep = active_kernel_set();
  for (KernelSet set : runnable_kernel_sets()) {
    use_kernel_set(set);
    uint64_t seed = 300;
    for (const Case& c : cases()) {
      const DecodeShape shape{c.group * c.n_kv, c.n_kv, c.head_dim, 0.25};
      Inputs<float> want = make_inputs<float>(c, true, seed += 50, true);
      attention_decode<float>(want.queries, shape);
      for (Layout layout : {Layout::heads, Layout::heads_keys_only}) {
        Inputs<float> in = make_inputs<float>(c, true, seed, true, layout);
        attention_decode<float>(in.queries, shape);
        for (size_t i = 0; i < in.out.size(); ++i) {
          ASSERT_EQ(in.out[i], want.out[i]) << kernel_set_name(set) << ", " << name(c) << " at " << i;
          ASSERT_EQ(in.gated[i], want.gated[i]) << kernel_set_name(set) << ", " << name(c) << " at " << i;
        }
      }
    }
  }
  use_kernel_set(keep);
}

TEST(AttentionDecodeTest, DoubleMatchesNaiveFp64) {
  uint64_t seed = 7;
  for (const Case& c : cases()) {
    const double scale = 0.3;
    for (bool sinks : {false, true})
      for (Layout layout : {Layout::rows, Layout::heads, Layout::heads_keys_only}) {
        Inputs<double> in = make_inputs<double>(c, true, seed += 50, sinks, layout);
        attention_decode<double>(in.queries, {c.group * c.n_kv, c.n_kv, c.head_dim, scale});
        const std::vector<double> want = naive_attention(in, c, scale);
        EXPECT_LT(rel_error(in.out, want), 1e-13)
            << name(c) << (sinks ? " with sinks" : "") << " layout " << static_cast<int>(layout);
      }
  }
}

// Float inputs whose cached rows are rounded to a stored type S (F16 bits or Q8_0 blocks),
// and the same queries over stored copies of those rows (the same offsets into copies of the
// same buffers): what a cache kept in S holds, and what the float kernel would read had the
// rows been widened first. A Q8_0 copy counts its offsets and strides in blocks of 32.
template <typename S>
struct StoredInputs {
  Inputs<float> in;  // rows rounded to S's values
  std::vector<std::vector<S>> stored[4];  // keys, values, head_keys, head_values as S
  std::vector<float> out, gated;
  std::vector<DecodeQuery<float, S>> queries;
};

template <typename S>
constexpr ElementType stored_type = std::is_same_v<S, BlockQ8_0> ? ElementType::q8_0 : ElementType::f16;
template <typename S>
constexpr int64_t unit_values = std::is_same_v<S, BlockQ8_0> ? kQuantBlockValues : 1;

template <typename S>
StoredInputs<S> make_stored_inputs(const Case& c, uint64_t seed, Layout layout) {
  constexpr int64_t u = unit_values<S>;
  StoredInputs<S> h;
  h.in = make_inputs<float>(c, true, seed, true, layout);
  std::vector<std::vector<float>>* buffers[4] = {&h.in.keys, &h.in.values, &h.in.head_keys, &h.in.head_values};
  for (int b = 0; b < 4; ++b)
    for (std::vector<float>& x : *buffers[b]) {
      const int64_t n = static_cast<int64_t>(x.size());
      h.stored[b].emplace_back(static_cast<size_t>(n / u));
      element_from_f32(stored_type<S>, h.stored[b].back().data(), x.data(), n);
      element_to_f32(stored_type<S>, x.data(), h.stored[b].back().data(), n);
    }
  // A float row pointer as the same offset into the stored copy of its buffer.
  auto stored_of = [&](const float* p, size_t i) -> const S* {
    for (int b = 0; b < 4; ++b) {
      const std::vector<float>& x = (*buffers[b])[i];
      if (p >= x.data() && p < x.data() + x.size()) return h.stored[b][i].data() + (p - x.data()) / u;
    }
    return nullptr;
  };
  // A layout in S's units (zeros: row-major rows, given explicitly).
  auto in_units = [&](KvLayout l) {
    if (l.row_stride == 0) l = {c.n_kv * c.head_dim, c.head_dim};
    return KvLayout{l.row_stride / u, l.head_stride / u};
  };
  h.out.assign(h.in.out.size(), -7.0f);
  h.gated.assign(h.in.gated.size(), -7.0f);
  for (size_t i = 0; i < h.in.queries.size(); ++i) {
    const DecodeQuery<float>& f = h.in.queries[i];
    const int64_t at = f.out - h.in.out.data();
    DecodeQuery<float, S> q{f.q, h.out.data() + at, f.gate_score, h.gated.data() + at, {}, f.sinks};
    for (const KvSpan<float>& sp : f.spans)
      q.spans.push_back({stored_of(sp.k, i), stored_of(sp.v, i), sp.len, in_units(sp.k_layout), in_units(sp.v_layout)});
    h.queries.push_back(q);
  }
  return h;
}

// Over F16 or Q8_0 rows the kernel widens each element exactly and then computes what it
// computes over floats: the fp64 reference on the rounded rows holds it to the float
// tolerance, and the float kernel over the rounded rows gives the same bits, in every kernel
// set (F16C's conversion on AVX2 and AVX-512, the scalar one in the generic set; a Q8_0
// block's int8 values times its scale). The portable loop over stored rows is held to the
// reference (the compiler may vectorise its float twin's reductions and not its, so their
// bits may differ). Q8_0 rows take the head sizes that are whole blocks.
template <typename S>
void expect_stored_rows_match_the_float_bits() {
  const KernelSet keep = active_kernel_set();
  for (KernelSet set : runnable_kernel_sets()) {
    use_kernel_set(set);
    uint64_t seed = 900;
    for (const Case& c : cases()) {
      if (c.head_dim % unit_values<S> != 0) continue;
      for (Layout layout : {Layout::rows, Layout::heads}) {
        const double scale = 1.0 / std::sqrt(double(c.head_dim));
        const DecodeShape shape{c.group * c.n_kv, c.n_kv, c.head_dim, scale};
        StoredInputs<S> h = make_stored_inputs<S>(c, seed += 50, layout);
        attention_decode<float, S>(h.queries, shape);
        attention_decode<float>(h.in.queries, shape);
        const std::vector<double> want = naive_attention(h.in, c, scale);
        EXPECT_LT(rel_error(h.out, want), 2e-6) << kernel_set_name(set) << ", " << name(c);
        for (size_t i = 0; i < h.out.size(); ++i) {
          ASSERT_EQ(h.out[i], h.in.out[i]) << kernel_set_name(set) << ", " << name(c) << " at " << i;
          ASSERT_EQ(h.gated[i], h.in.gated[i]) << kernel_set_name(set) << ", " << name(c) << " at " << i;
        }
        if (set != keep) continue;
        attention_decode_portable<float, S>(h.queries, shape);
        EXPECT_LT(rel_error(h.out, want), 2e-6) << "portable, " << name(c);
      }
    }
  }
  use_kernel_set(keep);
}

TEST(AttentionDecodeTest, HalfRowsMatchNaiveFp64AndTheFloatBits) { expect_stored_rows_match_the_float_bits<uint16_t>(); }

// Q8_0 rows (--kv-type q8_0), and they really are rounded: the widened rows differ from the
// random floats they came from.
TEST(AttentionDecodeTest, Q8RowsMatchNaiveFp64AndTheFloatBits) {
  expect_stored_rows_match_the_float_bits<BlockQ8_0>();
  const Case c{2, 2, 64, {{5}}};
  const Inputs<float> raw = make_inputs<float>(c, true, 950, true, Layout::rows);
  const StoredInputs<BlockQ8_0> h = make_stored_inputs<BlockQ8_0>(c, 950, Layout::rows);
  EXPECT_GT(rel_error(h.in.keys[0], std::vector<double>(raw.keys[0].begin(), raw.keys[0].end())), 1e-4);
}

// Q8_0 spans count in blocks: a head size that is not whole blocks, or a span without its
// strides (the zeros' row-major default counts values), is refused by name.
TEST(AttentionDecodeTest, RefusesQ8RowsThatAreNotWholeBlocks) {
  std::vector<BlockQ8_0> rows(8);
  std::vector<float> q(2 * 48), out(2 * 48);
  DecodeQuery<float, BlockQ8_0> dq{q.data(), out.data(), nullptr, nullptr, {{rows.data(), rows.data(), 1, {2, 1}, {2, 1}}}};
  const std::vector<DecodeQuery<float, BlockQ8_0>> queries{dq};
  EXPECT_THROW((attention_decode<float, BlockQ8_0>(queries, {2, 2, 48, 0.5})), Error);
  std::vector<float> q64(2 * 64), out64(2 * 64);
  DecodeQuery<float, BlockQ8_0> zero{q64.data(), out64.data(), nullptr, nullptr, {{rows.data(), rows.data(), 1}}};
  const std::vector<DecodeQuery<float, BlockQ8_0>> unstrided{zero};
  EXPECT_THROW((attention_decode<float, BlockQ8_0>(unstrided, {2, 2, 64, 0.5})), Error);
}

TEST(AttentionDecodeTest, RefusesBadShapes) {
  Inputs<float> in = make_inputs<float>({2, 2, 8, {{3}}}, false, 1);
  EXPECT_THROW(attention_decode<float>(in.queries, {3, 2, 8, 0.5}), Error);  // 3 heads over 2 kv heads
  in.queries[0].spans = {{in.keys[0].data(), in.values[0].data(), 0}};
  EXPECT_THROW(attention_decode<float>(in.queries, {4, 2, 8, 0.5}), Error);  // no rows
}

}  // namespace
}  // namespace gatedlm::kernels
