// GGUF for gated models (llama.cpp's qwen35 / qwen35moe, io/gguf_tables.h): the tables
// export and import share put the G1 gate's rows into attn_q per head (q rows, then gate
// rows), name the post-attention norm post_attention_norm, and give qwen35moe a zero
// shared expert when the model has none. Export refuses every gate variant llama.cpp has
// no form for, naming the key and the variant, and refuses the G1 gate in a model whose
// layers are all full attention, which llama.cpp aborts on (bench/RESULTS.md); with
// GATEDLM_GGUF_FORCE_ALL_FULL_QWEN35 set it writes the file anyway, as the reference test
// does to re-check llama.cpp.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "gguf_test_reader.h"
#include "io/gguf.h"
#include "io/gguf_tables.h"
#include "model/param_layout.h"
#include "test_util.h"

namespace gatedlm::io {
namespace {

nlohmann::json g1_gate() { return {{"position", "sdpa"}, {"granularity", "elementwise"}, {"activation", "sigmoid"}}; }

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
    for (const GgufRun& r : t.runs)
      if (r.spec == &gp) EXPECT_EQ(t.name, "blk.1.attn_q.weight");
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
  for (const GgufArchKey& k : gguf_arch_keys(c))
    if (k.key == "expert_shared_feed_forward_length") EXPECT_EQ(std::get<uint32_t>(k.value), 32u);

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
    export_gguf(ck, GgufDtype::f32, kByteVocabulary, path);
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
  export_gguf(ck, GgufDtype::f32, kByteVocabulary, path);
  ::unsetenv("GATEDLM_GGUF_FORCE_ALL_FULL_QWEN35");
  const testing::GgufTestFile f = testing::read_gguf_for_test(path);
  EXPECT_EQ(f.architecture, "qwen35");
  EXPECT_EQ(std::get<uint32_t>(f.metadata.at("qwen35.rope.dimension_count")), 4u);
  EXPECT_EQ(std::get<std::vector<int32_t>>(f.metadata.at("qwen35.rope.dimension_sections")),
            (std::vector<int32_t>{1, 1, 0, 0}));
  EXPECT_EQ(std::get<uint32_t>(f.metadata.at("qwen35.full_attention_interval")), 1u);
  EXPECT_EQ(f.tensors.at("blk.0.attn_q.weight").dims, (std::vector<uint64_t>{32, 64}));
  EXPECT_FALSE(f.tensors.count("blk.0.attn_gate.weight"));
}

}  // namespace
}  // namespace gatedlm::io
