// GGUF for gated models (llama.cpp's qwen35 / qwen35moe, io/gguf_tables.h): the tables
// export and import share put the G1 gate's rows into attn_q per head (q rows, then gate
// rows), name the post-attention norm post_attention_norm, and give qwen35moe a zero
// shared expert when the model has none. Export refuses every gate variant llama.cpp has
// no form for, naming the key and the variant, and refuses the G1 gate in a model whose
// layers are all full attention, which llama.cpp aborts on (bench/RESULTS.md); with
// GATEDLM_GGUF_FORCE_ALL_FULL_QWEN35 set it writes the file anyway, as the reference test
// does to re-check llama.cpp. Hybrid models (Gated DeltaNet layers) are qwen35: their value
// heads tiled as llama.cpp's converter writes them, A_log as -exp(A_log), zero-centred norms
// plus one, the layer kinds as an interval or a flag per layer.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "gguf_test_reader.h"
#include "io/gguf.h"
#include "io/gguf_tables.h"
#include "io_fixtures.h"
#include "model/param_layout.h"
#include "test_util.h"

namespace gatedlm::io {
namespace {

using testing::g1_gate;

model::ModelConfig gated_config(const nlohmann::json& gate, const nlohmann::json& extra = nlohmann::json::object()) {
  nlohmann::json j{{"vocab_size", kByteVocabularySize}, {"d_model", 32}, {"n_layers", 2}, {"n_heads", 4},
                   {"n_kv_heads", 2}, {"head_dim", 8},  {"ffn_hidden", 48}, {"max_seq_len", 16}, {"gate", gate}};
  j.update(extra);
  return model::config_from_json(j, "test");
}

// The values of a GGUF tensor as its runs make them.
std::vector<float> assemble(const GgufTensor& t, const std::vector<float>& params) {
  std::vector<float> v;
  for (const GgufRun& r : t.runs)
    for (int64_t i = 0; i < r.count; ++i) v.push_back(r.spec ? params[r.spec->offset + r.begin + i] : 0.0f);
  return v;
}

const GgufTensor& find(const std::vector<GgufTensor>& ts, const std::string& name) {
  for (const GgufTensor& t : ts)
    if (t.name == name) return t;
  ADD_FAILURE() << "no tensor " << name;
  static const GgufTensor none;
  return none;
}

TEST(GgufQwen35, GateRowsFollowEachHeadsQueryRowsInAttnQ) {
  const model::ModelConfig c = gated_config(g1_gate());
  EXPECT_EQ(gguf_architecture(c), "qwen35");
  const model::ParamLayout layout(c);
  const std::vector<float> params = testing::random_vector<float>(layout.total(), 4);
  const std::vector<GgufTensor> ts = gguf_tensors(layout, c);
  // The gate has no tensor of its own: its rows are in attn_q only.
  const model::ParamSpec& gp = layout.at("model.layers.1.self_attn.gate.weight");
  for (const GgufTensor& t : ts) {
    EXPECT_EQ(t.name.find("attn_gate"), std::string::npos) << t.name;
    for (const GgufRun& r : t.runs) {
      if (r.spec == &gp) { EXPECT_EQ(t.name, "blk.1.attn_q.weight"); }
    }
  }
  const GgufTensor& q = find(ts, "blk.1.attn_q.weight");
  EXPECT_EQ(q.shape, (std::vector<int64_t>{2 * 4 * 8, 32}));
  const std::vector<float> fused = assemble(q, params);
  const model::ParamSpec& qp = layout.at("model.layers.1.self_attn.q_proj.weight");
  for (int64_t h = 0; h < 4; ++h)
    for (int64_t r = 0; r < 8; ++r)
      for (int64_t col = 0; col < 32; ++col) {
        const int64_t ours = (h * 8 + r) * 32 + col;
        ASSERT_EQ(fused[((2 * h) * 8 + r) * 32 + col], params[qp.offset + ours]) << h << " " << r;
        ASSERT_EQ(fused[((2 * h + 1) * 8 + r) * 32 + col], params[gp.offset + ours]) << h << " " << r;
      }
  find(ts, "blk.0.post_attention_norm.weight");
  for (const GgufTensor& t : ts) EXPECT_NE(t.name, "blk.0.ffn_norm.weight");
}

TEST(GgufQwen35, MoeWithoutSharedExpertGetsAZeroOne) {
  const nlohmann::json moe{{"n_experts", 4}, {"top_k", 2}, {"expert_hidden", 16}};
  const model::ModelConfig c = gated_config(g1_gate(), {{"ffn_hidden", 0}, {"moe", moe}});
  EXPECT_EQ(gguf_architecture(c), "qwen35moe");
  const model::ParamLayout layout(c);
  const std::vector<GgufTensor> ts = gguf_tensors(layout, c);
  const std::vector<float> params(layout.total(), 1.0f);
  for (const char* name : {"blk.0.ffn_gate_shexp.weight", "blk.0.ffn_up_shexp.weight", "blk.0.ffn_down_shexp.weight"}) {
    const GgufTensor& t = find(ts, name);
    EXPECT_EQ(t.numel(), 32 * 32) << name;
    for (float v : assemble(t, params)) ASSERT_EQ(v, 0.0f) << name;
  }
  EXPECT_EQ(find(ts, "blk.1.ffn_gate_inp_shexp.weight").shape, (std::vector<int64_t>{32}));
  for (const GgufArchKey& k : gguf_arch_keys(c)) {
    if (k.key == "expert_shared_feed_forward_length") { EXPECT_EQ(std::get<uint32_t>(k.value), 32u); }
  }

  // A model with a shared expert keeps its own, its gate [1, d] stored as [d].
  const model::ModelConfig s = gated_config(g1_gate(), {{"ffn_hidden", 0}, {"moe", {{"n_experts", 4}, {"top_k", 2},
                                                                                     {"expert_hidden", 16}, {"n_shared", 1}}}});
  const model::ParamLayout sl(s);
  const std::vector<float> sp = testing::random_vector<float>(sl.total(), 6);
  const std::vector<GgufTensor> st = gguf_tensors(sl, s);
  const GgufTensor& gate = find(st, "blk.0.ffn_gate_inp_shexp.weight");
  EXPECT_EQ(gate.shape, (std::vector<int64_t>{32}));
  const model::ParamSpec& g = sl.at("model.layers.0.mlp.shared_expert_gate.weight");
  EXPECT_EQ(assemble(gate, sp), std::vector<float>(sp.begin() + g.offset, sp.begin() + g.offset + 32));
}

TEST(GgufQwen35, RopeSectionsGiveEveryRotatedPairASection) {
  for (int64_t rope_dims : {2, 4, 8, 16, 32, 64, 128, 22}) {
    const std::vector<int32_t> s = gguf_rope_sections(rope_dims);
    const int64_t pairs = rope_dims / 2;
    EXPECT_EQ(s.size(), 4u);
    EXPECT_EQ(s[0] + s[1] + s[2] + s[3], pairs);
    for (int64_t sector = 0; sector < pairs; ++sector)  // llama.cpp's interleaved M-RoPE rule
      EXPECT_LT(sector, 3 * s[sector % 3]) << rope_dims << " pair " << sector;
  }
}

std::string refusal(const model::ModelConfig& c, const std::string& file) {
  const std::string path = (std::filesystem::path(::testing::TempDir()) / file).string();
  std::filesystem::remove(path);
  Checkpoint ck{c, std::vector<float>(model::ParamLayout(c).total(), 0.25f)};
  try {
    export_gguf(ck, kernels::ElementType::f32, kByteVocabulary, path);
  } catch (const Error& e) {
    EXPECT_FALSE(std::filesystem::exists(path)) << file;
    return e.what();
  }
  ADD_FAILURE() << file << " was written";
  return "";
}

TEST(GgufQwen35, GateVariantsWithoutALlamaCppFormAreRefusedByName) {
  struct Case {
    nlohmann::json gate;
    const char* key;
    const char* variant;
  };
  const Case cases[] = {
      {{{"position", "sdpa"}, {"granularity", "headwise"}}, "gate.granularity", "G1 sdpa headwise"},
      {{{"position", "sdpa"}, {"head_shared", true}}, "gate.head_shared", "head-shared"},
      {{{"position", "value"}}, "gate.position", "G2 value"},
      {{{"position", "key"}}, "gate.position", "G3 key"},
      {{{"position", "query"}}, "gate.position", "G4 query"},
      {{{"position", "dense"}}, "gate.position", "G5 dense"},
      {{{"position", "sdpa"}, {"combine", "add"}, {"activation", "identity"}}, "gate.activation", "identity add"},
      {{{"position", "sdpa"}, {"combine", "add"}}, "gate.combine", "sigmoid add"},
      {{{"position", "sdpa"}, {"activation", "silu"}}, "gate.activation", "silu multiply"},
      {{{"position", "sdpa"}, {"activation", "ns_sigmoid"}}, "gate.activation", "ns_sigmoid"},
      {{{"position", "sdpa"}, {"input", "constant"}}, "gate.input", "input-independent"},
      {{{"position", "sdpa"}, {"input_dims", 16}}, "gate.input_dims", "reads 16 dims"},
  };
  for (const Case& c : cases) {
    const std::string what = refusal(gated_config(c.gate), "variant.gguf");
    EXPECT_NE(what.find(std::string("\"") + c.key + "\""), std::string::npos) << what;
    EXPECT_NE(what.find(c.variant), std::string::npos) << what;
    EXPECT_NE(what.find("no llama.cpp form"), std::string::npos) << what;
  }
}

TEST(GgufQwen35, AllFullAttentionG1IsRefusedWithLlamaCppsAbort) {
  const std::string what = refusal(gated_config(g1_gate()), "g1.gguf");
  EXPECT_NE(what.find("\"gate\""), std::string::npos) << what;
  EXPECT_NE(what.find("all full attention"), std::string::npos) << what;
  EXPECT_NE(what.find("GGML_ASSERT"), std::string::npos) << what;
  EXPECT_NE(what.find("--format paper"), std::string::npos) << what;
}

TEST(GgufQwen35, ForcedExportWritesQwen35Keys) {
  ::setenv("GATEDLM_GGUF_FORCE_ALL_FULL_QWEN35", "1", 1);
  const model::ModelConfig c = gated_config(g1_gate(), {{"rope_dims", 4}});
  Checkpoint ck{c, testing::random_vector<float>(model::ParamLayout(c).total(), 8)};
  const std::string path = (std::filesystem::path(::testing::TempDir()) / "forced.gguf").string();
  export_gguf(ck, kernels::ElementType::f32, kByteVocabulary, path);
  ::unsetenv("GATEDLM_GGUF_FORCE_ALL_FULL_QWEN35");
  const testing::GgufTestFile f = testing::read_gguf_for_test(path);  // read whole into memory
  std::filesystem::remove(path);
  EXPECT_EQ(f.architecture, "qwen35");
  EXPECT_EQ(std::get<uint32_t>(f.metadata.at("qwen35.rope.dimension_count")), 4u);
  EXPECT_EQ(std::get<std::vector<int32_t>>(f.metadata.at("qwen35.rope.dimension_sections")),
            (std::vector<int32_t>{1, 1, 0, 0}));
  EXPECT_EQ(std::get<uint32_t>(f.metadata.at("qwen35.full_attention_interval")), 1u);
  EXPECT_EQ(f.tensors.at("blk.0.attn_q.weight").dims, (std::vector<uint64_t>{32, 64}));
  EXPECT_FALSE(f.tensors.count("blk.0.attn_gate.weight"));
}

// A hybrid: linear layers 0 and 2, full 1 and 3 (interval 2); 2 key heads serving 4 value
// heads; zero-centred norms.
nlohmann::json hybrid(const nlohmann::json& extra = nlohmann::json::object()) {
  nlohmann::json j{{"full_attention_interval", 2}, {"n_layers", 4}, {"norm_zero_centered", true},
                   {"linear_attention", {{"n_k_heads", 2}, {"n_v_heads", 4}, {"k_head_dim", 8}, {"v_head_dim", 8}}}};
  j.update(extra);
  return j;
}

TEST(GgufQwen35, LinearLayersTileTheValueHeadsAndMapTheirValues) {
  const model::ModelConfig c = gated_config(g1_gate(), hybrid());
  const model::ParamLayout layout(c);
  const std::vector<float> params = testing::random_vector<float>(layout.total(), 12);
  const std::vector<GgufTensor> ts = gguf_tensors(layout, c);
  // Tiled head t = m * n_k + j holds grouped head j * r + m (r = 2): 0, 2, 1, 3.
  const std::vector<float> beta = assemble(find(ts, "blk.2.ssm_beta.weight"), params);
  const model::ParamSpec& b = layout.at("model.layers.2.linear_attn.in_proj_b.weight");
  const int64_t grouped[] = {0, 2, 1, 3};
  for (int64_t t = 0; t < 4; ++t)
    for (int64_t col = 0; col < 32; ++col) ASSERT_EQ(beta[t * 32 + col], params[b.offset + grouped[t] * 32 + col]) << t;
  // ssm_out [d, n_v * dv]: within each row, the heads' columns tiled.
  const std::vector<float> out = assemble(find(ts, "blk.0.ssm_out.weight"), params);
  const model::ParamSpec& o = layout.at("model.layers.0.linear_attn.out_proj.weight");
  for (int64_t row = 0; row < 32; ++row)
    for (int64_t t = 0; t < 4; ++t)
      for (int64_t i = 0; i < 8; ++i)
        ASSERT_EQ(out[row * 32 + t * 8 + i], params[o.offset + row * 32 + grouped[t] * 8 + i]) << row << " " << t;
  EXPECT_EQ(find(ts, "blk.0.ssm_conv1d.weight").shape, (std::vector<int64_t>{2 * 16 + 32, 4}));
  EXPECT_EQ(find(ts, "blk.0.ssm_a").values, GgufValues::minus_exp);
  EXPECT_EQ(find(ts, "blk.0.ssm_norm.weight").values, GgufValues::as_is);  // the gated norm stays plain
  for (const char* norm : {"blk.0.attn_norm.weight", "blk.1.attn_q_norm.weight", "blk.3.post_attention_norm.weight",
                           "output_norm.weight"})
    EXPECT_EQ(find(ts, norm).values, GgufValues::plus_one) << norm;
  find(ts, "blk.1.attn_q.weight");
}

TEST(GgufQwen35, LayerKindsAreAnIntervalOrAFlagPerLayer) {
  auto key = [](const model::ModelConfig& c, const std::string& name) -> const GgufArchKey* {
    static std::vector<GgufArchKey> keys;
    keys = gguf_arch_keys(c);
    for (const GgufArchKey& k : keys)
      if (k.key == name) return &k;
    return nullptr;
  };
  const model::ModelConfig every_second = gated_config(g1_gate(), hybrid());
  ASSERT_NE(key(every_second, "full_attention_interval"), nullptr);
  EXPECT_EQ(std::get<uint32_t>(key(every_second, "full_attention_interval")->value), 2u);
  EXPECT_EQ(std::get<uint32_t>(key(every_second, "ssm.time_step_rank")->value), 4u);
  EXPECT_EQ(std::get<uint32_t>(key(every_second, "ssm.inner_size")->value), 32u);
  nlohmann::json listed = hybrid();
  listed.erase("full_attention_interval");
  listed["layer_types"] = {"full_attention", "linear_attention", "linear_attention", "full_attention"};
  const model::ModelConfig irregular = gated_config(g1_gate(), listed);
  EXPECT_EQ(key(irregular, "full_attention_interval"), nullptr);
  ASSERT_NE(key(irregular, "attention.recurrent_layers"), nullptr);
  EXPECT_EQ(std::get<std::vector<bool>>(key(irregular, "attention.recurrent_layers")->value),
            (std::vector<bool>{false, true, true, false}));
}

TEST(GgufQwen35, HybridsLlamaCppCannotRunAreRefusedByKey) {
  nlohmann::json ungated = hybrid();
  const std::string no_gate = refusal(gated_config(nlohmann::json{{"position", "none"}}, ungated), "ungated.gguf");
  EXPECT_NE(no_gate.find("\"gate\""), std::string::npos) << no_gate;
  nlohmann::json wide = hybrid();
  wide["linear_attention"]["v_head_dim"] = 16;
  const std::string dims = refusal(gated_config(g1_gate(), wide), "dims.gguf");
  EXPECT_NE(dims.find("linear_attention.v_head_dim"), std::string::npos) << dims;
}

}  // namespace
}  // namespace gatedlm::io
