// The hybrid Hugging Face formats (qwen3_next, qwen3_5, qwen3_5_moe): the fused-layout row
// maps (written out by hand for small shapes), the name tables, and the config mapping's
// refusals by name. The end-to-end checks against PyTorch are in
// tests/reference/test_hf_hybrid_formats.py.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "core/error.h"
#include "io/hf_config.h"
#include "io/hf_convert.h"
#include "io/hf_hybrid_names.h"
#include "model/config.h"
#include "model/param_layout.h"
#include "model/value_heads.h"
#include "io_fixtures.h"
#include "test_files.h"

namespace gatedlm::io {
namespace {

using nlohmann::json;

model::LinearAttentionConfig linear(int64_t n_k, int64_t n_v, int64_t d_k, int64_t d_v) {
  model::LinearAttentionConfig la;
  la.n_k_heads = n_k, la.n_v_heads = n_v, la.k_head_dim = d_k, la.v_head_dim = d_v;
  return la;
}

// A small Qwen3.5 text config (4 layers, 3 linear : 1 full by the default interval).
json qwen35_text() {
  return {{"model_type", "qwen3_5_text"}, {"vocab_size", 20}, {"hidden_size", 16}, {"intermediate_size", 24},
          {"num_hidden_layers", 4}, {"num_attention_heads", 2}, {"num_key_value_heads", 1}, {"head_dim", 8},
          {"linear_num_key_heads", 1}, {"linear_num_value_heads", 2}, {"linear_key_head_dim", 4},
          {"linear_value_head_dim", 4}, {"max_position_embeddings", 32}};
}

json moe_keys(json j) {
  j["num_experts"] = 3, j["num_experts_per_tok"] = 2, j["moe_intermediate_size"] = 6,
  j["shared_expert_intermediate_size"] = 5;
  return j;
}

// Runs f, expecting gatedlm::Error whose message names `needle`.
template <typename F>
void expect_refusal(F f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one naming " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// Qwen3-Next's in_proj_qkvz / in_proj_ba per key head (n_k 2, n_v 4, d_k 3, d_v 2: blocks of
// 3 + 3 + 4 + 4 = 14 rows and 2 + 2 = 4 rows): every fused row is hit exactly once.
TEST(HybridLayoutTest, QwenNextFusedProjectionsUngroupPerKeyHead) {
  const model::LinearAttentionConfig la = linear(2, 4, 3, 2);
  EXPECT_EQ(qkvz_row(la, LinearPart::qkv, 4), 15);       // q of key head 1, element 1
  EXPECT_EQ(qkvz_row(la, LinearPart::qkv, 6 + 2), 5);    // k of key head 0, element 2
  EXPECT_EQ(qkvz_row(la, LinearPart::qkv, 12 + 5), 21);  // v of value head 2 (key head 1), element 1
  EXPECT_EQ(qkvz_row(la, LinearPart::z, 3), 13);         // z of value head 1 (key head 0), element 1
  EXPECT_EQ(ba_row(la, LinearPart::b, 3), 5);            // b of value head 3: key head 1's block, slot 1
  EXPECT_EQ(ba_row(la, LinearPart::a, 0), 2);            // a of value head 0 after key head 0's b
  std::set<int64_t> qkvz, ba;
  for (int64_t r = 0; r < la.conv_dim(); ++r) qkvz.insert(qkvz_row(la, LinearPart::qkv, r));
  for (int64_t r = 0; r < la.value_dim(); ++r) qkvz.insert(qkvz_row(la, LinearPart::z, r));
  for (int64_t r = 0; r < la.n_v_heads; ++r) ba.insert({ba_row(la, LinearPart::b, r), ba_row(la, LinearPart::a, r)});
  EXPECT_EQ(qkvz.size(), 28u);
  EXPECT_EQ(*qkvz.rbegin(), 27);
  EXPECT_EQ(ba.size(), 8u);
  EXPECT_EQ(*ba.rbegin(), 7);
}

TEST(HybridLayoutTest, QueryAndGateRowsInterleavePerHead) {
  EXPECT_EQ(head_interleaved_row(4, false, 5), 9);   // head 1, element 1
  EXPECT_EQ(head_interleaved_row(4, true, 5), 13);   // its gate row
  EXPECT_EQ(head_interleaved_row(4, true, 0), 4);
}

TEST(HybridLayoutTest, NamesFollowTheFormatAndPrefix) {
  json wrapped = {{"model_type", "qwen3_5_moe"}, {"text_config", moe_keys(qwen35_text())}};
  wrapped["text_config"]["model_type"] = "qwen3_5_moe_text";
  const model::ModelConfig c = config_from_hf(wrapped, HfFormat::qwen3_5_moe, "test");
  const model::ParamLayout layout(c);
  const std::string prefix = hf_weight_prefix(wrapped);
  ASSERT_EQ(prefix, "model.language_model.");
  int64_t stacked = 0;
  for (const TensorMapping& m : map_tensors(c, layout, HfFormat::qwen3_5_moe, prefix)) {
    EXPECT_TRUE(m.theirs.rfind(prefix, 0) == 0 || m.theirs == "lm_head.weight") << m.theirs;
    if (m.spec->name == "model.layers.3.self_attn.gate.weight") {
      EXPECT_EQ(m.theirs, prefix + "layers.3.self_attn.q_proj.weight");
      EXPECT_EQ(m.their_shape, (std::vector<int64_t>{2 * 2 * 8, 16}));
      EXPECT_EQ(m.row(8), 24);  // head 1's first gate row
    }
    if (m.spec->name == "model.layers.0.mlp.experts.2.up_proj.weight") {
      EXPECT_EQ(m.theirs, prefix + "layers.0.mlp.experts.gate_up_proj");
      EXPECT_EQ(m.their_shape, (std::vector<int64_t>{3, 12, 16}));
      EXPECT_EQ(m.row(1), 2 * 12 + 6 + 1);
      ++stacked;
    }
    if (m.spec->name == "model.layers.0.mlp.experts.1.down_proj.weight") {
      EXPECT_EQ(m.their_shape, (std::vector<int64_t>{3, 16, 6}));
      EXPECT_EQ(m.row(0), 16);
      ++stacked;
    }
  }
  EXPECT_EQ(stacked, 2);
}

TEST(HybridLayoutTest, QwenNextLinearLayersReadTheFusedTensors) {
  json j = moe_keys(qwen35_text());
  j["model_type"] = "qwen3_next";
  const model::ModelConfig c = config_from_hf(j, HfFormat::qwen3_next, "test");
  const model::ParamLayout layout(c);
  std::set<std::string> theirs;
  for (const TensorMapping& m : map_tensors(c, layout, HfFormat::qwen3_next, hf_weight_prefix(j)))
    if (m.spec->name.rfind("model.layers.0.linear_attn.in_proj", 0) == 0) {
      theirs.insert(m.theirs);
      const bool qkvz = m.theirs.find("qkvz") != std::string::npos;
      EXPECT_EQ(m.their_shape, (std::vector<int64_t>{qkvz ? 2 * 4 + 2 * 8 : 4, 16})) << m.theirs;
    }
  EXPECT_EQ(theirs, (std::set<std::string>{"model.layers.0.linear_attn.in_proj_qkvz.weight",
                                           "model.layers.0.linear_attn.in_proj_ba.weight"}));
}

TEST(HybridConfigTest, ModelTypesSelectTheFormat) {
  EXPECT_EQ(detect_hf_format(json{{"model_type", "qwen3_next"}}), HfFormat::qwen3_next);
  EXPECT_EQ(detect_hf_format(json{{"model_type", "qwen3_5_text"}}), HfFormat::qwen3_5);
  EXPECT_EQ(detect_hf_format(json{{"model_type", "x"}, {"text_config", {{"model_type", "qwen3_5_moe_text"}}}}),
            HfFormat::qwen3_5_moe);
  EXPECT_EQ(detect_hf_format(json{{"model_type", "qwen3"}}), HfFormat::qwen3);
  EXPECT_EQ(parse_hf_format("qwen3_5_moe"), HfFormat::qwen3_5_moe);
  expect_refusal([] { parse_hf_format("qwen35"); }, "qwen3_next|qwen3_5|qwen3_5_moe");
}

TEST(HybridConfigTest, ReadsTransformersDefaultsAndZeroCentredNorms) {
  const model::ModelConfig c = config_from_hf(qwen35_text(), HfFormat::qwen3_5, "test");
  EXPECT_TRUE(c.norm_zero_centered);
  EXPECT_EQ(c.rope_dims, 2);  // partial_rotary_factor 0.25 of head_dim 8
  EXPECT_EQ(c.gate.position, model::GatePosition::sdpa);
  EXPECT_EQ(c.linear_layers(), 3);  // full_attention_interval 4
  EXPECT_FALSE(c.is_linear(3));
  EXPECT_FALSE(c.has_moe());
}

TEST(HybridConfigTest, RefusesByKey) {
  auto with = [](const char* key, json value, HfFormat f = HfFormat::qwen3_5) {
    json j = f == HfFormat::qwen3_5_moe ? moe_keys(qwen35_text()) : qwen35_text();
    if (f == HfFormat::qwen3_5_moe) j["model_type"] = "qwen3_5_moe_text";
    j[key] = std::move(value);
    return [j, f] { config_from_hf(j, f, "cfg.json"); };
  };
  expect_refusal(with("attn_output_gate", false), "\"attn_output_gate\"");
  expect_refusal(with("rope_parameters", {{"rope_type", "yarn"}}), "\"rope_parameters.rope_type\"");
  expect_refusal(with("partial_rotary_factor", 0.3), "\"partial_rotary_factor\"");
  expect_refusal(with("layer_types", json::array({"linear_attention"})), "\"layer_types\"");
  expect_refusal(with("use_sliding_window", true), "\"use_sliding_window\"");
  expect_refusal(with("rope_magic", 4), "\"rope_magic\"");
  expect_refusal(with("num_experts", 4), "\"num_experts\"");  // a dense Qwen3.5 has none
  expect_refusal(with("decoder_sparse_step", 2, HfFormat::qwen3_5_moe), "\"decoder_sparse_step\"");
  expect_refusal(with("norm_topk_prob", false, HfFormat::qwen3_5_moe), "\"norm_topk_prob\"");
  expect_refusal(with("model_type", "qwen3_next"), "\"model_type\"");
  // Hardening, third round, row 8: the wrapper's type on a flat config was refused as
  // '"qwen3_5_moe" is not format qwen3_5_moe's "qwen3_5_moe_text"'; now it says what is missing.
  expect_refusal(with("model_type", "qwen3_5_moe", HfFormat::qwen3_5_moe), "has no \"text_config\"");
  expect_refusal(with("model_type", "qwen3_5"), "multimodal wrapper of format qwen3_5");
  json wrapped = {{"model_type", "qwen3_5"}, {"text_config", qwen35_text()}, {"quantization_config", json::object()}};
  expect_refusal([&] { config_from_hf(wrapped, HfFormat::qwen3_5, "cfg.json"); }, "\"quantization_config\"");
}

TEST(HybridConfigTest, ExportRoundTripsAndRefusesWhatTheFormatCannotSay) {
  json j = moe_keys(qwen35_text());
  j["model_type"] = "qwen3_next";
  j["decoder_sparse_step"] = 2;
  j["attention_bias"] = true;
  const model::ModelConfig c = config_from_hf(j, HfFormat::qwen3_next, "test");
  const json out = json::parse(config_to_hf(c, HfFormat::qwen3_next, "float32").dump());
  EXPECT_EQ(model::config_to_json(config_from_hf(out, HfFormat::qwen3_next, "exported")),
            model::config_to_json(c));
  model::ModelConfig plain = c;
  plain.norm_zero_centered = false;
  expect_refusal([&] { config_to_hf(plain, HfFormat::qwen3_next, "float32"); }, "\"norm_zero_centered\"");
  model::ModelConfig headwise = c;
  headwise.gate.granularity = model::GateGranularity::headwise;
  expect_refusal([&] { config_to_hf(headwise, HfFormat::qwen3_next, "float32"); }, "\"gate.granularity\"");
  expect_refusal([&] { config_to_hf(c, HfFormat::qwen3_5, "float32"); }, "\"moe\"");
  expect_refusal([&] { config_to_hf(c, HfFormat::qwen3_5_moe, "float32"); }, "\"moe.every\"");
}

}  // namespace
}  // namespace gatedlm::io

namespace gatedlm::io {
namespace {

// A model with tiled value heads (as a qwen35 GGUF imports, model/value_heads.h) is written in
// Hugging Face's grouped order: the same files as the grouped model it is.
TEST(HybridExport, TiledValueHeadsAreWrittenGrouped) {
  const json config = {{"vocab_size", 20}, {"d_model", 16}, {"n_layers", 2}, {"n_heads", 2}, {"n_kv_heads", 1},
                       {"head_dim", 8}, {"ffn_hidden", 24}, {"max_seq_len", 32}, {"norm_zero_centered", true},
                       {"gate", testing::g1_gate()}, {"full_attention_interval", 2},
                       {"linear_attention", {{"n_k_heads", 2}, {"n_v_heads", 4}, {"k_head_dim", 4}, {"v_head_dim", 4}}}};
  const Checkpoint grouped = testing::random_checkpoint(config, 3);
  Checkpoint tiled = grouped;
  model::reorder_value_heads(tiled.config, tiled.params, model::ValueHeadOrder::tiled);
  ASSERT_NE(tiled.params, grouped.params);
  const testing::TempDir dir("hf_tiled_export");
  export_hf(grouped, HfFormat::qwen3_5, kernels::ElementType::f32, (dir / "grouped").string());
  export_hf(tiled, HfFormat::qwen3_5, kernels::ElementType::f32, (dir / "tiled").string());
  for (const char* file : {"model.safetensors", "config.json"})
    EXPECT_EQ(testing::read_file((dir / "tiled" / file).string()), testing::read_file((dir / "grouped" / file).string()))
        << file;
}

}  // namespace
}  // namespace gatedlm::io
