// The decoder asks each layer's kind what it keeps per sequence (model/layer_kinds.h's
// decode_state): a kind registered from outside model/ with no decode state
// (tests/support/toy_layer_kind.h) gets no KV cache rows, and prefill + decode over a model
// with it between softmax layers give the logits of the full forward; a kind whose queries
// see the last W keys (kv_window) gets a cache of W rows: softmax attention registered with a
// window decodes as the plain model under a streaming window of W tokens and no sinks.
#include <gtest/gtest.h>

#include "infer/decoder.h"
#include "model/init.h"
#include "model/mixer_attention.h"
#include "test_util.h"
#include "toy_layer_kind.h"

namespace gatedlm::infer {
namespace {

constexpr int64_t kTextLength = 20, kPrompt = 7;

model::ModelConfig three_layers(std::vector<model::LayerKind> kinds) {
  model::ModelConfig c;
  c.vocab_size = 30, c.d_model = 16, c.n_layers = 3, c.n_heads = 2, c.n_kv_heads = 1, c.head_dim = 8;
  c.ffn_hidden = 24, c.max_seq_len = 64, c.rope_dims = 8, c.init_std = 0.3;
  c.gate.position = model::GatePosition::sdpa;
  c.layer_types = std::move(kinds);
  return c;
}

// Parameters of seed 9 (the layouts of the models compared are the same).
model::Model<float> model_of(const model::ModelConfig& c) {
  model::Model<float> m(c);
  std::vector<float> p;
  model::init_params(p, m.layout(), c, 9);
  m.load_params(p);
  return m;
}

std::vector<int32_t> random_text(int64_t vocab) {
  Rng rng(1);
  std::vector<int32_t> text(kTextLength);
  for (auto& t : text) t = static_cast<int32_t>(rng.below(vocab));
  return text;
}

// The logits of tokens kPrompt-1 .. kTextLength-1: a prompt, then one token per step.
std::vector<float> decode_logits(Decoder& dec, const std::vector<int32_t>& text, int64_t vocab) {
  const float* lg = dec.step(std::vector<Chunk>{{0, std::span(text).first(kPrompt)}});
  std::vector<float> got(lg, lg + vocab);
  for (int64_t t = kPrompt; t < kTextLength; ++t) {
    lg = dec.step(std::vector<Chunk>{{0, std::span(text).subspan(t, 1)}});
    got.insert(got.end(), lg, lg + vocab);
  }
  return got;
}

TEST(LayerKindDecoder, AKindWithoutDecodeStateDecodesAsTheFullForward) {
  testing::register_silu_kind();
  const model::ModelConfig c =
      three_layers({model::LayerKind::full_attention, testing::kSiluKind, model::LayerKind::full_attention});
  model::Model<float> m = model_of(c), ref = model_of(c);
  Decoder dec(m, {1, 0, 0, 0});
  const int64_t kv = c.n_kv_heads * c.head_dim, V = c.vocab_size;
  EXPECT_EQ(dec.state_bytes_per_sequence(10), static_cast<int64_t>(sizeof(float)) * 2 * 2 * 10 * kv)
      << "two softmax layers keep keys and values, the SiLU layer nothing";
  const std::vector<int32_t> text = random_text(V);
  const std::vector<float> got = decode_logits(dec, text, V);
  ref.forward(text.data(), nullptr, 1, kTextLength);
  const std::vector<float> want(ref.logits() + (kPrompt - 1) * V, ref.logits() + kTextLength * V);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_LT(testing::rel_error(got, want), 1e-5);
}

// Softmax attention under another kind id whose queries see the last 5 keys in decode.
constexpr model::LayerKind kWindowedKind = static_cast<model::LayerKind>(102);
constexpr int64_t kWindow = 5;
void register_windowed_attention() {
  model::LayerKindSpec spec = model::attention_layer_kind();
  spec.kind = kWindowedKind;
  spec.name = "windowed_attention";
  spec.kv_window = [](const model::ModelConfig&) { return kWindow; };
  model::register_layer_kind(spec);
}

TEST(LayerKindDecoder, AKindWithAWindowKeepsThatManyRowsAndSeesThatManyKeys) {
  register_windowed_attention();
  const model::ModelConfig windowed = three_layers({kWindowedKind, kWindowedKind, kWindowedKind});
  const model::ModelConfig plain = three_layers({});
  model::Model<float> mw = model_of(windowed), mp = model_of(plain);
  Decoder dw(mw, {1, 0, 0, 0}), dp(mp, {1, 0, /*window=*/kWindow, /*sinks=*/0});
  EXPECT_EQ(dw.state_bytes_per_sequence(100), dp.state_bytes_per_sequence(100));
  const std::vector<int32_t> text = random_text(plain.vocab_size);
  const std::vector<float> got = decode_logits(dw, text, plain.vocab_size),
                           want = decode_logits(dp, text, plain.vocab_size);
  EXPECT_LT(testing::rel_error(got, want), 1e-6);

  // Beside full attention: the full layers keep every row, the windowed one kWindow.
  model::Model<float> mixed = model_of(three_layers({model::LayerKind::full_attention, kWindowedKind,
                                                     model::LayerKind::full_attention}));
  Decoder dm(mixed, {1, 0, 0, 0});
  const int64_t kv = plain.n_kv_heads * plain.head_dim;
  EXPECT_EQ(dm.state_bytes_per_sequence(40), static_cast<int64_t>(sizeof(float)) * 2 * (2 * 40 + kWindow) * kv);
  EXPECT_EQ(dm.capacity(), plain.max_seq_len);
}

// The built-in sliding_attention kind (model/mixer_sliding.h) between full layers: prefill
// and decode past the window give the training-shaped forward's logits (the kernels' window
// there, the W-row ring here), with the gate and learned sinks.
TEST(LayerKindDecoder, SlidingAttentionDecodesAsItsWindowedForward) {
  model::ModelConfig c = three_layers({model::LayerKind::full_attention, model::LayerKind::sliding_attention,
                                       model::LayerKind::sliding_attention});
  c.sliding_window = 4;
  c.attention_sinks = true;
  c.validate();
  model::Model<float> m = model_of(c), ref = model_of(c);
  Decoder dec(m, {1, 0, 0, 0});
  const int64_t kv = c.n_kv_heads * c.head_dim, V = c.vocab_size;
  EXPECT_EQ(dec.state_bytes_per_sequence(30), static_cast<int64_t>(sizeof(float)) * 2 * (30 + 2 * 4) * kv);
  const std::vector<int32_t> text = random_text(V);
  const std::vector<float> got = decode_logits(dec, text, V);
  ref.forward(text.data(), nullptr, 1, kTextLength);
  const std::vector<float> want(ref.logits() + (kPrompt - 1) * V, ref.logits() + kTextLength * V);
  EXPECT_LT(testing::rel_error(got, want), 1e-5);
}

}  // namespace
}  // namespace gatedlm::infer
