// A hybrid model (Gated DeltaNet layers between gated softmax layers) decoded incrementally:
// staggered prompts (one shorter than the chunked kernel's threshold, one over a chunk of the
// delta rule) and then decode steps of several sequences at once give the logits of the full
// forward of each sequence; the decode state per sequence does not grow in the linear layers.
#include <gtest/gtest.h>

#include <algorithm>

#include "infer/decoder.h"
#include "model/init.h"
#include "test_util.h"

namespace gatedlm::infer {
namespace {

using testing::rel_error;

model::ModelConfig hybrid_config() {
  model::ModelConfig c;
  c.vocab_size = 40, c.d_model = 24, c.n_layers = 4, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 8;
  c.ffn_hidden = 32, c.max_seq_len = 128, c.rope_dims = 2;  // partial rotary, as Qwen3.5's 0.25
  c.gate.position = model::GatePosition::sdpa;
  c.init_std = 0.2;
  c.norm_zero_centered = true;
  c.layer_types = {model::LayerKind::linear_attention, model::LayerKind::linear_attention,
                   model::LayerKind::linear_attention, model::LayerKind::full_attention};
  c.linear_attention = {/*n_k_heads=*/2, /*n_v_heads=*/4, /*k_head_dim=*/6, /*v_head_dim=*/5, /*conv_kernel=*/4};
  return c;
}

model::Model<float> random_hybrid_model(const model::ModelConfig& c) {
  model::Model<float> m(c);
  std::vector<float> p(m.layout().total());
  model::init_params(p, m.layout(), c, 5);
  Rng rng(6);  // move the zero-centred norms off zero so that 1 + w is tested
  for (const model::ParamSpec& s : m.layout().specs())
    if (s.kind == model::ParamKind::norm)
      for (int64_t i = 0; i < s.numel; ++i) p[s.offset + i] = static_cast<float>(0.2 * rng.normal());
  m.load_params(p);
  return m;
}

// Staggered prompts and then decode steps of three sequences give the full forward's logits;
// returns the largest relative error of a slot.
// kv_type: the softmax layers' cache rows (the linear layers' state stays fp32).
double expect_decode_equals_full_forward(const model::ModelConfig& c, double tolerance = 1e-5,
                                       kernels::ElementType kv_type = kernels::ElementType::f32) {
  model::Model<float> m = random_hybrid_model(c), ref = random_hybrid_model(c);
  const int64_t V = c.vocab_size, total = 90;
  const std::vector<int64_t> prompts{5, 20, 70};  // recurrent, chunked, two chunks
  std::vector<std::vector<int32_t>> texts;
  for (int64_t s = 0; s < 3; ++s) {
    Rng rng(100 + s);
    std::vector<int32_t> t(total);
    for (auto& x : t) x = static_cast<int32_t>(rng.below(V));
    texts.push_back(t);
  }
  DecoderOptions options{3, 0, 0, 0};
  options.kv_type = kv_type;
  Decoder dec(m, options);
  std::vector<std::vector<float>> got(3);  // logits of tokens prompt-1 .. per slot
  for (int64_t s = 0; s < 3; ++s) {  // prompts one step each, then slot 0's second chunk beside slot 1's
    const float* lg = dec.step(std::vector<Chunk>{{s, std::span(texts[s]).first(prompts[s])}});
    got[s].assign(lg, lg + V);
  }
  std::vector<int64_t> pos = prompts;
  for (int step = 0; step < 12; ++step) {
    std::vector<Chunk> chunks;
    for (int64_t s = 0; s < 3; ++s)
      if ((step + s) % 4 != 0) chunks.push_back({s, std::span(texts[s]).subspan(pos[s]++, 1)});
    const float* lg = dec.step(chunks);
    for (size_t i = 0; i < chunks.size(); ++i) got[chunks[i].slot].insert(got[chunks[i].slot].end(), lg + i * V, lg + (i + 1) * V);
  }
  double worst = 0;
  for (int64_t s = 0; s < 3; ++s) {
    ref.forward(texts[s].data(), nullptr, 1, pos[s]);
    const std::vector<float> want(ref.logits() + (prompts[s] - 1) * V, ref.logits() + pos[s] * V);
    EXPECT_EQ(got[s].size(), want.size()) << "slot " << s;
    if (got[s].size() != want.size()) return 1.0;
    worst = std::max(worst, rel_error(got[s], want));
    EXPECT_LT(rel_error(got[s], want), tolerance) << "slot " << s;
  }
  return worst;
}

TEST(HybridDecoder, StaggeredPrefillAndDecodeEqualFullForward) { expect_decode_equals_full_forward(hybrid_config()); }

// Incremental passes share one set of block tensors across the layers (model_state.h), sized
// for every kind of layer: here linear and full attention, dense and MoE FFNs of other widths.
TEST(HybridDecoder, DenseAndMoeLayersShareTheIncrementalTensors) {
  model::ModelConfig c = hybrid_config();
  c.moe.n_experts = 4, c.moe.top_k = 2, c.moe.expert_hidden = 20, c.moe.n_shared = 1, c.moe.shared_hidden = 12, c.moe.every = 2;
  // The experts' products group other rows in each pass, so the sums round differently (the
  // same logits differ by 1.8e-5 before and after the tensors were shared).
  expect_decode_equals_full_forward(c, 5e-5);
}

// An f16 cache rounds the softmax layer's keys and values (relative 2^-11 each): the logits
// stay within 2e-3 of the full forward's, as the dense decoder's do (test_decoder.cpp).
TEST(HybridDecoder, AnF16CacheStaysWithinItsRounding) {
  EXPECT_GT(expect_decode_equals_full_forward(hybrid_config(), 2e-3, kernels::ElementType::f16), 1e-6)
      << "the rows were not rounded";
}

// A q8_0 cache (head_dim 32: one block a head row) rounds them by up to half of max|x| / 127
// of a block: within 3e-2, and further than F16's rounding.
TEST(HybridDecoder, AQ8CacheStaysWithinItsRounding) {
  model::ModelConfig c = hybrid_config();
  c.head_dim = 32;
  EXPECT_GT(expect_decode_equals_full_forward(c, 3e-2, kernels::ElementType::q8_0), 1e-4) << "the rows were not rounded";
}

TEST(HybridDecoder, LinearLayersKeepAConstantStatePerSequence) {
  const model::ModelConfig c = hybrid_config();
  model::Model<float> m = random_hybrid_model(c);
  Decoder dec(m, {1, 32768, 0, 0});
  const int64_t kv_per_token = 2 * c.kv_dim() * static_cast<int64_t>(sizeof(float));  // one softmax layer
  const int64_t at_1k = dec.state_bytes_per_sequence(1024), at_32k = dec.state_bytes_per_sequence(32768);
  EXPECT_EQ(at_32k - at_1k, (32768 - 1024) * kv_per_token);  // only the softmax layer grows
  const model::LinearAttentionConfig& la = c.linear_attention;
  const int64_t recurrent = 3 * (model::conv_state_size(la) + model::delta_state_size(la)) * 4;
  EXPECT_EQ(at_1k, 1024 * kv_per_token + recurrent);
}

}  // namespace
}  // namespace gatedlm::infer
