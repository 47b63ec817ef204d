// The decode attention kernel against the reference attention, and the streaming window
// against a naive recomputation: with one layer, a token's keys and values depend on the
// token alone, so the rolling cache's logits for token t must equal the full forward over
// the cache's contents (sinks, then the window) at positions 0.. (StreamingLLM's positions
// inside the cache). And the F16 and Q8_0 caches (--kv-type f16 / q8_0): their rows come back
// rounded, their logits stay within the rounding of the float cache's, full and streaming.
#include <gtest/gtest.h>

#include <new>

#include "core/error.h"
#include "infer/decoder.h"
#include "infer/kv_cache.h"
#include "kernels/attention.h"
#include "kernels/attention_decode.h"
#include "kernels/element_types.h"
#include "kernels/half_float.h"
#include "model/init.h"
#include "test_util.h"
#include "seeded_model.h"

namespace gatedlm::infer {
namespace {

using testing::random_vector;
using testing::rel_error;

TEST(AttentionDecode, MatchesReferenceLastRowWithSplitSpans) {
  const int64_t T = 37, nq = 4, nkv = 2, D = 8;
  const auto q = random_vector<float>(T * nq * D, 1), k = random_vector<float>(T * nkv * D, 2),
             v = random_vector<float>(T * nkv * D, 3), g = random_vector<float>(nq * D, 4);
  const kernels::AttentionShape as{1, T, nq, nkv, D, 0.3};
  std::vector<float> ref(T * nq * D), lse(T * nq);
  kernels::attention_forward_reference(ref.data(), lse.data(), q.data(), k.data(), v.data(), as);
  for (int64_t split : {T, int64_t{5}}) {  // one span, or rows 0..4 and 5..T-1 apart
    std::vector<float> out(nq * D), gated(nq * D);
    kernels::DecodeQuery<float> dq{q.data() + (T - 1) * nq * D, out.data(), g.data(), gated.data(), {}};
    dq.spans.push_back({k.data() + split % T * nkv * D, v.data() + split % T * nkv * D, T - split % T});
    if (split < T) dq.spans.push_back({k.data(), v.data(), split});
    kernels::attention_decode<float>(std::span(&dq, 1), {nq, nkv, D, 0.3});
    const std::vector<float> want(ref.end() - nq * D, ref.end());
    EXPECT_LT(rel_error(out, want), 1e-6);
    for (int64_t i = 0; i < nq * D; ++i) EXPECT_FLOAT_EQ(gated[i], out[i] * g[i]);
  }
}

model::ModelConfig small_config(int64_t layers) {
  model::ModelConfig c;
  c.vocab_size = 50, c.d_model = 32, c.n_layers = layers, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 8;
  c.ffn_hidden = 48, c.max_seq_len = 16, c.rope_dims = 6;
  c.rope_scaling = {model::RopeScalingType::yarn, 2.0, 16};  // a magnitude != 1 and partial RoPE
  c.gate.position = model::GatePosition::sdpa;
  c.init_std = 0.2;
  return c;
}

model::Model<float> random_model(const model::ModelConfig& c) { return gatedlm::testing::seeded_model(c, 7); }

std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(rng.below(vocab));
  return t;
}

TEST(StreamingWindow, EqualsFullForwardOverCacheContents) {
  const model::ModelConfig c = small_config(1);
  model::Model<float> m = random_model(c), ref = random_model(c);
  const int64_t N = 30, W = 5, V = c.vocab_size;
  const auto text = random_tokens(N, V, 11);
  for (int64_t sinks : {0, 1, 3})
    for (int64_t prompt : {1, 4, 12}) {  // a prefill that fits, and one that wraps the window
      Decoder dec(m, {1, 0, W, sinks});
      std::vector<float> got;  // logits of tokens prompt-1 .. N-1
      const float* lg = dec.step(std::vector<Chunk>{{0, std::span(text).first(prompt)}}, true);
      got.assign(lg, lg + prompt * V);
      for (int64_t t = prompt; t < N; ++t) {
        lg = dec.step(std::vector<Chunk>{{0, std::span(text).subspan(t, 1)}});
        got.insert(got.end(), lg, lg + V);
      }
      for (int64_t t = 0; t < N; ++t) {
        std::vector<int32_t> window;  // the cache's contents as token t's query sees them
        for (int64_t u = 0; u < std::min(sinks, t + 1); ++u) window.push_back(text[u]);
        for (int64_t u = std::max(sinks, t - W + 1); u <= t; ++u) window.push_back(text[u]);
        const int64_t L = static_cast<int64_t>(window.size());
        ref.forward(window.data(), nullptr, 1, L);
        const std::vector<float> want(ref.logits() + (L - 1) * V, ref.logits() + L * V);
        const std::vector<float> row(got.begin() + t * V, got.begin() + (t + 1) * V);
        EXPECT_LT(rel_error(row, want), 1e-5) << "sinks " << sinks << " prompt " << prompt << " token " << t;
      }
    }
}

TEST(StreamingWindow, WithoutEvictionEqualsFullCache) {
  const model::ModelConfig c = small_config(2);
  model::Model<float> m = random_model(c);
  const int64_t N = 12, V = c.vocab_size;
  const auto text = random_tokens(N, V, 5);
  m.forward(text.data(), nullptr, 1, N);
  const std::vector<float> full(m.logits(), m.logits() + N * V);
  Decoder dec(m, {1, 0, N - 2, 2});
  std::vector<float> got;
  for (int64_t t = 0; t < N; ++t) {
    const float* lg = dec.step(std::vector<Chunk>{{0, std::span(text).subspan(t, 1)}});
    got.insert(got.end(), lg, lg + V);
  }
  EXPECT_LT(rel_error(got, full), 1e-5);
}

// Decode steps of 6 sequences (more than the skinny kernel's rows) multiply by packed
// copies of the weights: every token's logits still equal the full forward's, packed or not.
TEST(Decoder, ManySequencesDecodeThroughPackedWeights) {
  const model::ModelConfig c = small_config(2);
  model::Model<float> m = random_model(c), ref = random_model(c);
  const int64_t B = 6, N = 11, V = c.vocab_size;
  std::vector<std::vector<int32_t>> texts;
  for (int64_t b = 0; b < B; ++b) texts.push_back(random_tokens(N, V, 100 + b));
  for (const bool packed : {true, false}) {
    DecoderOptions o{B, N};
    o.packed_weights = packed;
    Decoder dec(m, o);
    std::vector<std::vector<float>> got(B);
    std::vector<Chunk> chunks;
    for (int64_t b = 0; b < B; ++b) chunks.push_back({b, std::span(texts[b]).first(1 + b % 3)});
    const float* lg = dec.step(chunks, true);
    for (int64_t b = 0; b < B; ++b) {
      const int64_t rows = 1 + b % 3;
      got[b].assign(lg, lg + rows * V);
      lg += rows * V;
    }
    for (int64_t t = 1; t < N; ++t) {
      chunks.clear();
      for (int64_t b = 0; b < B; ++b)
        if (t >= 1 + b % 3) chunks.push_back({b, std::span(texts[b]).subspan(t, 1)});
      lg = dec.step(chunks);
      for (const Chunk& ch : chunks) got[ch.slot].insert(got[ch.slot].end(), lg + (&ch - chunks.data()) * V,
                                                        lg + (&ch - chunks.data() + 1) * V);
    }
    for (int64_t b = 0; b < B; ++b) {
      ref.forward(texts[b].data(), nullptr, 1, N);
      EXPECT_LT(rel_error(got[b], std::vector<float>(ref.logits(), ref.logits() + N * V)), 1e-5)
          << "sequence " << b << (packed ? " packed" : " plain");
    }
    if (packed)
      EXPECT_GT(dec.packed_weights().matrices(), 0);
    else
      EXPECT_EQ(dec.packed_weights().matrices(), 0);
  }
}

TEST(Decoder, RejectsOverflowAndBadChunks) {
  const model::ModelConfig c = small_config(1);
  model::Model<float> m = random_model(c);
  Decoder dec(m, {2, 4});
  const std::vector<int32_t> five{1, 2, 3, 4, 5};
  EXPECT_THROW(dec.step(std::vector<Chunk>{{0, five}}), Error);
  EXPECT_THROW(dec.step(std::vector<Chunk>{{2, std::span(five).first(1)}}), Error);
  EXPECT_THROW(dec.step(std::vector<Chunk>{{0, std::span(five).first(1)}, {0, std::span(five).first(1)}}), Error);
  EXPECT_THROW(Decoder(m, {1, 0, 0, 2}), Error);  // sinks without a window
}

// A cache larger than the machine's memory is refused as a failed allocation before it is
// asked for (serve names the flags that size it), and one that fits is made. Without the
// check the allocator itself would throw here in Release, but the sanitized pass (which runs
// this test) would abort on the request: that is what the check is for.
TEST(KvCacheSize, PastTheMachinesMemoryIsRefusedBeforeAllocating) {
  EXPECT_THROW(KvCache(CacheGeometry{4, 2, 64, 8, int64_t{1} << 40}), std::bad_alloc);
  const KvCache fits(CacheGeometry{4, 2, 64, 8, 128});
  EXPECT_EQ(fits.geometry().capacity, 128);
}

// Value e of a stored head row as fp32: itself, F16 bits widened, or a Q8_0 block's d * q.
float stored_value(const float* row, int64_t e) { return row[e]; }
float stored_value(const uint16_t* row, int64_t e) { return kernels::f16_to_f32(row[e]); }
float stored_value(const kernels::BlockQ8_0* row, int64_t e) {
  const kernels::BlockQ8_0& b = row[e / 32];
  return kernels::f16_to_f32(b.d) * static_cast<float>(b.qs[e % 32]);
}

// Rows written into every (layer, slot) come back out of read_rows as written (rounded to
// the cache's type head row by head row, by element_types' conversions), and a span's
// layout finds row j of kv head h where the row-major block had it: nothing overlaps.
template <typename S>
void check_rows_come_back(CacheGeometry g) {
  g.type = kv_row_type<S>;
  KvCache cache(g);
  const int64_t W = g.row_width(), D = g.head_dim, first = 2, count = 4;
  std::vector<std::vector<float>> keys, values;  // per (layer, slot): [count, n_kv, head_dim]
  for (int64_t l = 0; l < g.n_layers; ++l)
    for (int64_t s = 0; s < g.slots; ++s) {
      keys.push_back(random_vector<float>(count * W, 100 + 2 * (l * g.slots + s)));
      values.push_back(random_vector<float>(count * W, 101 + 2 * (l * g.slots + s)));
      cache.write_rows(l, s, first, count, keys.back().data(), values.back().data());
      std::vector<std::byte> stored(static_cast<size_t>(g.head_row_bytes()));
      for (std::vector<float>* x : {&keys.back(), &values.back()})
        for (int64_t r = 0; r < count * g.n_kv; ++r) {
          kernels::element_from_f32(g.type, stored.data(), x->data() + r * D, D);
          kernels::element_to_f32(g.type, x->data() + r * D, stored.data(), D);
        }
    }
  for (int64_t l = 0, i = 0; l < g.n_layers; ++l)
    for (int64_t s = 0; s < g.slots; ++s, ++i) {
      std::vector<float> k(count * W), v(count * W);
      cache.read_rows(l, s, first, count, k.data(), v.data());
      EXPECT_EQ(k, keys[i]) << "layer " << l << " slot " << s;
      EXPECT_EQ(v, values[i]) << "layer " << l << " slot " << s;
      const kernels::KvSpan<S> sp = cache.span<S>(l, s, first + 1, count - 1);
      ASSERT_EQ(sp.len, count - 1);
      for (int64_t j = 0; j < sp.len; ++j)
        for (int64_t h = 0; h < g.n_kv; ++h)
          for (int64_t e = 0; e < D; ++e) {
            EXPECT_EQ(stored_value(sp.k + sp.k_layout.at(j, h, g.n_kv, D), e), keys[i][(j + 1) * W + h * D + e]);
            EXPECT_EQ(stored_value(sp.v + sp.v_layout.at(j, h, g.n_kv, D), e), values[i][(j + 1) * W + h * D + e]);
          }
    }
  std::vector<float> k(W), v(W);
  EXPECT_THROW(cache.read_rows(0, 0, 6, 2, k.data(), v.data()), Error);  // rows 6..7 of 7
  EXPECT_THROW(cache.write_rows(0, 0, -1, 1, k.data(), v.data()), Error);
}

TEST(KvCacheLayout, RowsComeBackAndSpansFindThem) {
  const CacheGeometry g{3, 2, 5, 2, 7};  // layers, kv heads, head_dim, slots, capacity
  check_rows_come_back<float>(g);
  check_rows_come_back<uint16_t>(g);
  check_rows_come_back<kernels::BlockQ8_0>({3, 2, 64, 2, 7});  // two blocks a head row
}

// Rows are f32, f16 or q8_0 (q8_0 in whole blocks of 32 a head row) and read as what they
// are; a token's bytes as the type stores them.
TEST(KvCacheLayout, RefusesOtherTypesAndMismatchedSpans) {
  CacheGeometry g{1, 2, 4, 1, 3};
  g.type = kernels::ElementType::q4_0;
  EXPECT_THROW(KvCache{g}, Error);
  g.type = kernels::ElementType::q8_0;
  try {
    KvCache{g};
    ADD_FAILURE() << "q8_0 rows of 4 values were taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("head_dim"), std::string::npos) << e.what();
  }
  g.type = kernels::ElementType::f16;
  const KvCache half(g);
  EXPECT_THROW(half.span<float>(0, 0, 0, 1), Error);
  EXPECT_THROW(half.span<kernels::BlockQ8_0>(0, 0, 0, 1), Error);
  EXPECT_EQ(g.token_bytes(), 2 * 2 * 4);
  g.head_dim = 64, g.type = kernels::ElementType::q8_0;
  EXPECT_EQ(g.token_bytes(), 2 * 2 * 34);  // two kv heads of two 34-byte blocks
  EXPECT_THROW(KvCache{g}.span<uint16_t>(0, 0, 0, 1), Error);
}

// Logits of a prompt and of tokens decoded one at a time, from an f32 cache and one of
// `type` (full, or streaming with sinks: the moved sink keys are rounded back to the type
// too), within `most` of each other and further apart than `least` (the rounded rows are
// in use). Returns nothing; the model's head_dim is 32 so that Q8_0 rows are one block.
void expect_within_rounding(kernels::ElementType type, double most, double least) {
  model::ModelConfig c = small_config(2);
  c.head_dim = 32;
  model::Model<float> m = random_model(c);
  const int64_t N = 40, V = c.vocab_size;
  const auto text = random_tokens(N, V, 17);
  for (const std::pair<int64_t, int64_t>& window_sinks : {std::pair<int64_t, int64_t>{0, 0}, {6, 2}}) {
    std::vector<float> logits[2];
    for (int rounded = 0; rounded < 2; ++rounded) {
      DecoderOptions o{1, N, window_sinks.first, window_sinks.second};
      o.kv_type = rounded ? type : kernels::ElementType::f32;
      Decoder dec(m, o);
      const float* lg = dec.step(std::vector<Chunk>{{0, std::span(text).first(5)}}, true);
      logits[rounded].assign(lg, lg + 5 * V);
      for (int64_t t = 5; t < N; ++t) {
        lg = dec.step(std::vector<Chunk>{{0, std::span(text).subspan(t, 1)}});
        logits[rounded].insert(logits[rounded].end(), lg, lg + V);
      }
      const int64_t row_bytes = rounded ? kernels::element_row_bytes(type, c.head_dim) : 4 * c.head_dim;
      EXPECT_EQ(dec.state_bytes_per_sequence(N), 2 * c.n_layers * c.n_kv_heads * row_bytes * (window_sinks.first ? 8 : N));
    }
    const double err = rel_error(logits[1], logits[0]);
    EXPECT_LT(err, most) << kernels::element_name(type) << " window " << window_sinks.first;
    EXPECT_GT(err, least) << kernels::element_name(type) << " window " << window_sinks.first;
  }
}

// F16 keeps 11 significant bits (relative rounding at most 2^-11 = 4.9e-4 per element): the
// logits move by about that much, not by 1e-7 nor by 1e-2.
TEST(Decoder, AnF16CacheStaysWithinItsRounding) { expect_within_rounding(kernels::ElementType::f16, 2e-3, 1e-6); }

// Q8_0 rounds each value to within half a step of its block's max|x| / 127: for Gaussian
// rows about 0.5 % of a value's size (RMS), some 20 times F16's rounding. The logits move by
// about 1 % here (F16: 4.4e-4), not by less than F16's nor by several percent.
TEST(Decoder, AQ8CacheStaysWithinItsRounding) { expect_within_rounding(kernels::ElementType::q8_0, 3e-2, 3e-3); }

}  // namespace
}  // namespace gatedlm::infer
