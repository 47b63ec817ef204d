// infer/prefix_cache.h and prefix_reuse.h: the cache finds the longest restorable prefix,
// keeps a conversation in one entry, evicts the least recently used entry and stays within
// its budget; and a prompt started from a restored prefix gives the logits of the same
// prompt run in one step, bit for bit, for a dense, a hybrid (Gated DeltaNet) and a MoE
// model with random weights, through later decode steps too.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "core/rng.h"
#include "infer/decoder.h"
#include "infer/prefix_cache.h"
#include "infer/prefix_reuse.h"
#include "infer/scheduler.h"
#include "model/init.h"
#include "test_util.h"
#include "seeded_model.h"

namespace gatedlm::infer {
namespace {

// Rows of per_token floats a token, base, base + 1, ..., as the bytes the cache keeps.
std::vector<std::byte> prefix_kv(int64_t tokens, int64_t per_token, float base) {
  std::vector<float> kv(static_cast<size_t>(tokens * per_token));
  std::iota(kv.begin(), kv.end(), base);
  std::vector<std::byte> bytes(kv.size() * sizeof(float));
  std::memcpy(bytes.data(), kv.data(), bytes.size());
  return bytes;
}

float first_float(const std::byte* kv) {
  float x;
  std::memcpy(&x, kv, sizeof(x));
  return x;
}

TEST(PrefixCache, FindsTheLongestSharedPrefixWithinTheLimit) {
  PrefixCache cache(1 << 20, 2 * sizeof(float), 0);
  cache.insert(std::vector<int32_t>{1, 2, 3, 4}, prefix_kv(4, 2, 0), {});
  cache.insert(std::vector<int32_t>{1, 2, 9, 9, 9}, prefix_kv(5, 2, 100), {});
  EXPECT_EQ(cache.entries(), 2);
  PrefixCache::Hit hit = cache.lookup(std::vector<int32_t>{1, 2, 9, 9, 7, 7}, 5);
  EXPECT_EQ(hit.tokens, 4);
  EXPECT_EQ(hit.kv_rows, 5);
  EXPECT_EQ(first_float(hit.kv), 100.0f);
  hit = cache.lookup(std::vector<int32_t>{1, 2, 3, 4, 5}, 3);  // the limit cuts it
  EXPECT_EQ(hit.tokens, 3);
  EXPECT_EQ(first_float(hit.kv), 0.0f);
  EXPECT_EQ(cache.lookup(std::vector<int32_t>{7, 1, 2}, 2).tokens, 0);
}

TEST(PrefixCache, AHybridRestoresOnlyItsSnapshots) {
  PrefixCache cache(1 << 20, 2 * sizeof(float), 3);
  const std::vector<int32_t> turn1{1, 2, 3, 4}, turn2{1, 2, 3, 4, 5, 6, 7, 8};
  cache.insert(turn1, prefix_kv(4, 2, 0), {4, 4, 4});
  cache.insert(turn2, prefix_kv(8, 2, 0), {8, 8, 8});
  EXPECT_EQ(cache.entries(), 1);  // the longer conversation took the shorter one's snapshot over
  std::vector<int32_t> branch{1, 2, 3, 4, 5, 6, 0, 0, 0};
  PrefixCache::Hit hit = cache.lookup(branch, 8);
  EXPECT_EQ(hit.tokens, 4);
  EXPECT_EQ(hit.snapshot[0], 4.0f);
  std::vector<int32_t> longer{1, 2, 3, 4, 5, 6, 7, 8, 9};
  EXPECT_EQ(cache.lookup(longer, 8).tokens, 8);
  EXPECT_EQ(cache.lookup(longer, 7).tokens, 4);
  EXPECT_TRUE(cache.holds(turn1));
  EXPECT_FALSE(cache.holds(std::vector<int32_t>{1, 2, 3}));  // no snapshot there
}

TEST(PrefixCache, EvictsTheLeastRecentlyUsedWithinItsBudget) {
  // An entry of 4 tokens: 4 * 4 floats of rows + 4 token ids = 80 bytes; room for two.
  PrefixCache cache(170, 4 * sizeof(float), 0);
  const std::vector<int32_t> a{1, 1, 1, 1}, b{2, 2, 2, 2}, c{3, 3, 3, 3};
  cache.insert(a, prefix_kv(4, 4, 0), {});
  cache.insert(b, prefix_kv(4, 4, 0), {});
  EXPECT_EQ(cache.bytes(), 160);
  EXPECT_EQ(cache.lookup(a, 3).tokens, 3);  // a is now the most recently used
  cache.insert(c, prefix_kv(4, 4, 0), {});
  EXPECT_LE(cache.bytes(), cache.budget());
  EXPECT_EQ(cache.entries(), 2);
  EXPECT_EQ(cache.lookup(b, 3).tokens, 0);
  EXPECT_EQ(cache.lookup(a, 3).tokens, 3);
  EXPECT_EQ(cache.lookup(c, 3).tokens, 3);
  cache.insert(std::vector<int32_t>(10, 5), prefix_kv(10, 4, 0), {});  // over the whole budget: not kept
  EXPECT_EQ(cache.entries(), 2);  // and nothing evicted for it
  EXPECT_EQ(cache.lookup(std::vector<int32_t>(10, 5), 9).tokens, 0);
  PrefixCache off(0, 4 * sizeof(float), 0);
  off.insert(a, prefix_kv(4, 4, 0), {});
  EXPECT_EQ(off.entries(), 0);
}

// --- exactness ---

model::ModelConfig prefix_dense_config() {
  model::ModelConfig c;
  c.vocab_size = 50, c.d_model = 32, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 8;
  c.ffn_hidden = 64, c.max_seq_len = 512;
  c.gate.position = model::GatePosition::sdpa;
  c.init_std = 0.2;
  return c;
}

model::ModelConfig prefix_hybrid_config() {
  model::ModelConfig c = prefix_dense_config();
  c.n_layers = 4, c.rope_dims = 2;
  c.norm_zero_centered = true;
  c.layer_types = {model::LayerKind::linear_attention, model::LayerKind::linear_attention,
                   model::LayerKind::linear_attention, model::LayerKind::full_attention};
  c.linear_attention = {/*n_k_heads=*/2, /*n_v_heads=*/4, /*k_head_dim=*/6, /*v_head_dim=*/5, /*conv_kernel=*/4};
  return c;
}

model::ModelConfig prefix_moe_config() {
  model::ModelConfig c = prefix_dense_config();
  c.moe.n_experts = 4, c.moe.top_k = 2, c.moe.expert_hidden = 32, c.moe.shared_hidden = 32;
  return c;
}

model::Model<float> prefix_random_model(const model::ModelConfig& c) { return gatedlm::testing::seeded_model(c, 21); }

std::vector<int32_t> prefix_random_tokens(int64_t n, int64_t vocab, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(rng.below(vocab));
  return t;
}

// Runs prompt in slot 0 (from its cached prefix when reuse is given, in the pieces it asks
// for) and `decode` greedy tokens after it; returns the logits of the prompt's last token
// and of every decoded token. *cached: the restored prefix.
std::vector<float> run_prompt(Decoder& dec, PrefixReuse* reuse, const std::vector<int32_t>& prompt, int decode,
                              int64_t* cached = nullptr) {
  const int64_t V = dec.config().vocab_size, n = static_cast<int64_t>(prompt.size());
  int64_t from = 0;
  if (reuse) {
    from = reuse->restore(0, prompt);
  } else {
    dec.reset(0);
  }
  if (cached) *cached = from;
  const float* lg = nullptr;
  while (from < n) {
    const int64_t end = reuse ? reuse->piece_end(from, n) : n;
    lg = dec.step(std::vector<Chunk>{{0, std::span(prompt).subspan(from, end - from)}});
    if (reuse) reuse->fed(0, prompt, end);
    from = end;
  }
  std::vector<float> out(lg, lg + V);
  for (int i = 0; i < decode; ++i) {
    const int32_t next = static_cast<int32_t>(std::max_element(out.end() - V, out.end()) - (out.end() - V));
    lg = dec.step(std::vector<Chunk>{{0, std::span(&next, 1)}});
    out.insert(out.end(), lg, lg + V);
  }
  return out;
}

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// The greedy token of each row of logits [rows, V].
std::vector<int64_t> greedy(const std::vector<float>& logits, int64_t V) {
  std::vector<int64_t> out;
  for (size_t r = 0; r * V < logits.size(); ++r)
    out.push_back(std::max_element(logits.begin() + r * V, logits.begin() + (r + 1) * V) - (logits.begin() + r * V));
  return out;
}

// A conversation of turns that each resend the history plus new tokens: every turn gives
// with the cache the greedy tokens and (to rounding) the logits of a decoder without it.
// Not the bits: the products (oneDNN) round a row differently with the step's row count,
// which the cache changes as continuous batching does. Returns the tokens restored per turn.
std::vector<int64_t> check_conversation(const model::ModelConfig& c, const std::vector<int64_t>& turn_lengths,
                                        kernels::ElementType kv_type = kernels::ElementType::f32) {
  model::Model<float> m = prefix_random_model(c), ref_model = prefix_random_model(c);
  const DecoderOptions options{.slots = 1, .packed_weights = false, .kv_type = kv_type};
  Decoder dec(m, options), ref(ref_model, options);
  PrefixReuse reuse(dec, 64 << 20);
  const std::vector<int32_t> text = prefix_random_tokens(turn_lengths.back(), c.vocab_size, 3);
  std::vector<int64_t> cached;
  for (size_t turn = 0; turn < turn_lengths.size(); ++turn) {
    const std::vector<int32_t> prompt(text.begin(), text.begin() + turn_lengths[turn]);
    int64_t restored = 0;
    const std::vector<float> got = run_prompt(dec, &reuse, prompt, 6, &restored);
    const std::vector<float> want = run_prompt(ref, nullptr, prompt, 6);
    EXPECT_EQ(greedy(got, c.vocab_size), greedy(want, c.vocab_size)) << "turn " << turn;
    EXPECT_LT(testing::rel_error(got, want), 1e-5) << "turn " << turn << " (" << prompt.size() << " tokens, "
                                                   << restored << " restored)";
    cached.push_back(restored);
  }
  return cached;
}

// Prompt a's state, saved by the cache and restored into another slot for a prompt b that
// continues it, is bit for bit the state a fresh decoder computes for the restored prefix
// in the same steps, and both continue to the same bits.
void check_restore_exact(const model::ModelConfig& c, int64_t a_len, int64_t b_len, int64_t restorable,
                         kernels::ElementType kv_type = kernels::ElementType::f32) {
  model::Model<float> m = prefix_random_model(c), ref_model = prefix_random_model(c);
  Decoder dec(m, {.slots = 2, .packed_weights = false, .kv_type = kv_type}),
      ref(ref_model, {.slots = 1, .packed_weights = false, .kv_type = kv_type});
  PrefixReuse reuse(dec, 64 << 20);
  const std::vector<int32_t> b = prefix_random_tokens(b_len, c.vocab_size, 8);
  const std::vector<int32_t> a(b.begin(), b.begin() + a_len);
  run_prompt(dec, &reuse, a, 3);
  const int64_t p = reuse.restore(1, b);
  ASSERT_EQ(p, restorable);
  for (int64_t from = 0; from < p;) {  // a's pieces up to the restored point
    const int64_t end = reuse.piece_end(from, a_len);
    ref.step(std::vector<Chunk>{{0, std::span(a).subspan(from, end - from)}});
    from = end;
  }
  EXPECT_EQ(dec.length(1), p);
  EXPECT_TRUE(same_bits(dec.save_rows(1, p), ref.save_rows(0, p)));
  EXPECT_TRUE(same_bits(dec.save_recurrent(1), ref.save_recurrent(0)));
  const int64_t V = c.vocab_size;
  const float* lg = dec.step(std::vector<Chunk>{{1, std::span(b).subspan(p)}});
  const std::vector<float> got(lg, lg + V);
  lg = ref.step(std::vector<Chunk>{{0, std::span(b).subspan(p)}});
  EXPECT_TRUE(same_bits(got, std::vector<float>(lg, lg + V)));
}

TEST(PrefixReuse, DenseTurnsGiveTheTokensOfOneStep) {
  const std::vector<int64_t> cached = check_conversation(prefix_dense_config(), {40, 41, 97, 230, 231});
  EXPECT_EQ(cached, (std::vector<int64_t>{0, 40, 41, 97, 230}));
}

TEST(PrefixReuse, MoeTurnsGiveTheTokensOfOneStep) {
  const std::vector<int64_t> cached = check_conversation(prefix_moe_config(), {40, 97, 230});
  EXPECT_EQ(cached, (std::vector<int64_t>{0, 40, 97}));
}

// A hybrid restores snapshots at multiples of 64 at least 16 tokens before the prompt's end:
// a prompt of 150 is cut at 128 (a snapshot), so the next of 200 restores 128; one of 140
// may restore 64 at most, where there is no snapshot yet (it takes one), and one of 400
// restores 128 again.
TEST(PrefixReuse, HybridTurnsGiveTheTokensOfOneStep) {
  const std::vector<int64_t> cached = check_conversation(prefix_hybrid_config(), {10, 150, 200, 140, 400});
  EXPECT_EQ(cached, (std::vector<int64_t>{0, 0, 128, 0, 128}));
}

TEST(PrefixReuse, ARestoredStateIsTheStateComputedFromScratch) {
  check_restore_exact(prefix_dense_config(), 100, 150, 100);
  check_restore_exact(prefix_moe_config(), 100, 150, 100);
  check_restore_exact(prefix_hybrid_config(), 300, 350, 256);  // a's snapshot at 300 - 16 -> 256
}

// In an F16 KV cache (--kv-type f16) the rows are rounded as stored and every prompt reads
// them back rounded, so a restored prefix still continues to the bits of one step.
TEST(PrefixReuse, AnF16CacheRestoresExactlyToo) {
  check_restore_exact(prefix_dense_config(), 100, 150, 100, kernels::ElementType::f16);
  check_restore_exact(prefix_hybrid_config(), 300, 350, 256, kernels::ElementType::f16);
  const std::vector<int64_t> cached =
      check_conversation(prefix_dense_config(), {40, 97, 230}, kernels::ElementType::f16);
  EXPECT_EQ(cached, (std::vector<int64_t>{0, 40, 97}));
}

// A Q8_0 KV cache (--kv-type q8_0) likewise; its models need head_dim a multiple of 32.
TEST(PrefixReuse, AQ8CacheRestoresExactlyToo) {
  model::ModelConfig dense = prefix_dense_config(), hybrid = prefix_hybrid_config();
  dense.head_dim = hybrid.head_dim = 32;
  check_restore_exact(dense, 100, 150, 100, kernels::ElementType::q8_0);
  check_restore_exact(hybrid, 300, 350, 256, kernels::ElementType::q8_0);
  const std::vector<int64_t> cached = check_conversation(dense, {40, 97, 230}, kernels::ElementType::q8_0);
  EXPECT_EQ(cached, (std::vector<int64_t>{0, 40, 97}));
}

// The prefix cache keeps an f16 cache's rows as stored: a prompt's saved state takes half the
// bytes of the f32 one's (the token ids aside), so the same budget holds twice the history;
// a q8_0 cache's rows 34 bytes per 32 values (17/64 of f32's).
TEST(PrefixReuse, AnF16CacheSavesItsRowsInHalfTheBytes) {
  const model::ModelConfig c = prefix_dense_config();
  model::Model<float> m = prefix_random_model(c);
  const std::vector<int32_t> prompt = prefix_random_tokens(100, c.vocab_size, 3);
  int64_t row_bytes[2];
  for (int half = 0; half < 2; ++half) {
    Decoder dec(m, {.slots = 1, .packed_weights = false,
                    .kv_type = half ? kernels::ElementType::f16 : kernels::ElementType::f32});
    PrefixReuse reuse(dec, 64 << 20);
    run_prompt(dec, &reuse, prompt, 0);
    ASSERT_EQ(reuse.cache().entries(), 1);
    row_bytes[half] = reuse.cache().bytes() - 4 * 100;
    EXPECT_EQ(row_bytes[half], 100 * dec.kv_bytes_per_token());
  }
  EXPECT_EQ(row_bytes[0], 100 * 2 * c.n_layers * c.kv_dim() * 4);
  EXPECT_EQ(row_bytes[1] * 2, row_bytes[0]);
  model::ModelConfig c32 = c;
  c32.head_dim = 32;
  model::Model<float> m32 = prefix_random_model(c32);
  Decoder dec(m32, {.slots = 1, .packed_weights = false, .kv_type = kernels::ElementType::q8_0});
  PrefixReuse reuse(dec, 64 << 20);
  run_prompt(dec, &reuse, prompt, 0);
  EXPECT_EQ(reuse.cache().bytes() - 4 * 100, 100 * 2 * c.n_layers * c.n_kv_heads * 34);  // one block a head row
}

// The scheduler says whether it has a cache: its budget, off at 0, and off with the reason
// for a model with sliding-window layers (their rings of rows are not saved).
TEST(PrefixReuse, SlidingWindowLayersTurnTheCacheOff) {
  model::ModelConfig c = prefix_dense_config();
  model::Model<float> dense = prefix_random_model(c);
  c.layer_types = {model::LayerKind::sliding_attention, model::LayerKind::full_attention};
  c.sliding_window = 16;
  model::Model<float> sliding = prefix_random_model(c);
  auto status = [](model::Model<float>& m, int64_t bytes) {
    return Scheduler(m, {.max_batch = 1, .packed_weights = false, .prefix_cache_bytes = bytes}).prefix_cache_status();
  };
  EXPECT_EQ(status(dense, 1000), "1000 bytes");
  EXPECT_EQ(status(dense, 0), "off");
  EXPECT_EQ(status(sliding, 1000), "off (sliding-window layers keep a ring of rows that is not saved)");
}

}  // namespace
}  // namespace gatedlm::infer
