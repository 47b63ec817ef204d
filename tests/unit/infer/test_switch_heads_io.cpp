// Switch-head models outside training: the checkpoint round trip and its tensor names,
// `gatedlm params`, `gatedlm init` + `generate`, and prefill + decode over the KV cache
// equal to the full forward.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "core/rng.h"
#include "infer/decoder.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "model/init.h"
#include "test_files.h"
#include "test_util.h"
#include "test_fixtures.h"

namespace gatedlm {
namespace {

using testing::switch_config;

using nlohmann::json;
using testing::TempDir;

TEST(SwitchHeadsCheckpoint, RoundTripKeepsNamesAndValues) {
  TempDir dir("switch_ckpt");
  const model::ModelConfig c = model::config_from_json(switch_config(3, 2, "kv"));
  std::vector<float> params;
  model::init_params(params, model::ParamLayout(c), c, 9);
  io::save_checkpoint((dir / "ck").string(), c, params);
  const io::Checkpoint back = io::load_checkpoint((dir / "ck").string());
  EXPECT_EQ(back.params, params);
  EXPECT_EQ(model::config_to_json(back.config), model::config_to_json(c));
  EXPECT_EQ(back.config.switch_heads.top_k, 2);
  io::SafetensorsReader r((dir / "ck" / "model.safetensors").string());
  EXPECT_EQ(r.entry("model.layers.1.self_attn.kv_router.weight").shape, (std::vector<int64_t>{6, 32}));
  EXPECT_EQ(r.entry("model.layers.0.self_attn.k_experts.2.weight").shape, (std::vector<int64_t>{16, 32}));
  EXPECT_EQ(r.entry("model.layers.0.self_attn.v_experts.0.weight").shape, (std::vector<int64_t>{16, 32}));
  // Experts and routers are initialised like matrices: random, distinct per expert.
  const model::ParamLayout l(c);
  const auto& e0 = l.at("model.layers.0.self_attn.v_experts.0.weight");
  const auto& e1 = l.at("model.layers.0.self_attn.v_experts.1.weight");
  EXPECT_NE(params[e0.offset], params[e1.offset]);
  EXPECT_NE(params[l.at("model.layers.0.self_attn.kv_router.weight").offset], 0.0f);
}

// The decoder computes k and v per token with the same routing, so a prompt prefilled
// and the rest decoded token by token gives the full forward's logits.
TEST(SwitchHeadsDecode, PrefillAndDecodeEqualFullForward) {
  for (const char* on : {"v", "kv"})
    for (auto [E, K] : {std::pair{4, 2}, {3, 1}, {1, 1}}) {
      json j = switch_config(E, K, on);
      j["vocab_size"] = 50;
      j["gate"] = {{"position", "sdpa"}};
      const model::ModelConfig c = model::config_from_json(j);
      std::vector<float> w;
      model::init_params(w, model::ParamLayout(c), c, 13);
      model::Model<float> full(c), inc(c);
      full.load_params(w);
      inc.load_params(w);
      const int64_t N = 14, V = c.vocab_size;
      Rng rng(E * 10 + K);
      std::vector<int32_t> text(N);
      for (auto& t : text) t = static_cast<int32_t>(rng.below(V));
      full.forward(text.data(), nullptr, 1, N);
      const std::vector<float> want(full.logits(), full.logits() + N * V);
      for (int64_t prompt : {1, 6}) {
        infer::Decoder dec(inc, {1, 0, 0, 0});
        const float* lg = dec.step(std::vector<infer::Chunk>{{0, std::span(text).first(prompt)}}, true);
        std::vector<float> got(lg, lg + prompt * V);
        for (int64_t t = prompt; t < N; ++t) {
          lg = dec.step(std::vector<infer::Chunk>{{0, std::span(text).subspan(t, 1)}});
          got.insert(got.end(), lg, lg + V);
        }
        EXPECT_LT(testing::rel_error(got, want), 1e-5) << on << " " << E << "top" << K << " prompt " << prompt;
      }
    }
}

}  // namespace
}  // namespace gatedlm
