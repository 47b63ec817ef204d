// GGUF import of the hybrid architectures (io/gguf_import_hybrid.h) from what GGUF export
// writes: a dense hybrid (qwen35), an MoE hybrid with a shared expert (qwen35moe) and a
// Qwen3-Next-shaped one (qwen3next: grouped value heads, ssm_ba fused) come back with their
// config and every weight bit for bit from an F32 file, except the two kinds llama.cpp stores
// through a function: A_log (ssm_a = -exp(A_log)) and zero-centred norm weights (stored 1 + w),
// which come back within float32's rounding of that function, and such that exporting the
// imported checkpoint writes the same file byte for byte.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "io/gguf.h"
#include "io/gguf_import.h"
#include "io/gguf_tables.h"
#include "model/param_layout.h"
#include "model/value_heads.h"
#include "test_files.h"
#include "test_util.h"

namespace gatedlm::io {
namespace {

using nlohmann::json;
using testing::TempDir;

json hybrid_config(const json& extra) {
  json j{{"vocab_size", kByteVocabularySize},
         {"d_model", 32},
         {"n_layers", 4},
         {"n_heads", 4},
         {"n_kv_heads", 2},
         {"head_dim", 8},
         {"rope_dims", 4},
         {"ffn_hidden", 48},
         {"max_seq_len", 32},
         {"norm_eps", 1e-6},
         {"gate", {{"position", "sdpa"}, {"granularity", "elementwise"}, {"activation", "sigmoid"}}},
         {"full_attention_interval", 2},
         {"linear_attention", {{"n_k_heads", 2}, {"n_v_heads", 4}, {"k_head_dim", 8}, {"v_head_dim", 8}}}};
  j.update(extra);
  return j;
}

json moe(int64_t n_shared) {
  json m{{"n_experts", 4}, {"top_k", 2}, {"expert_hidden", 16}, {"n_shared", n_shared}};
  if (n_shared > 0) m["shared_hidden"] = 24;  // (without a shared expert the width means nothing)
  return {{"ffn_hidden", 0}, {"moe", m}};
}

struct Case {
  const char* arch;  // --gguf-arch
  json config;
};

std::vector<Case> cases() {
  json listed = hybrid_config(moe(1));
  listed.erase("full_attention_interval");
  listed["layer_types"] = {"linear_attention", "full_attention", "full_attention", "linear_attention"};
  return {{"qwen35", hybrid_config(json::object())},
          {"qwen35moe", listed},
          {"qwen3next", hybrid_config(moe(1))},
          {"qwen3next", hybrid_config(moe(0))}};  // no shared expert: the file's zero one is dropped
}

Checkpoint random_checkpoint(const json& config, bool zero_centered, uint64_t seed) {
  json j = config;
  j["norm_zero_centered"] = zero_centered;
  Checkpoint ck{model::config_from_json(j, "test"), {}};
  ck.params = testing::random_vector<float>(model::ParamLayout(ck.config).total(), seed, 0.3);
  return ck;
}

// Whether parameter `name` is stored through a function (A_log; a zero-centred norm).
bool mapped(const model::ParamSpec& s, const model::ModelConfig& c) {
  const bool gated_norm = s.name.find("linear_attn.norm") != std::string::npos;
  return s.name.find("A_log") != std::string::npos ||
         (c.norm_zero_centered && s.kind == model::ParamKind::norm && !gated_norm);
}

TEST(GgufImportHybrid, F32RoundTripsGiveTheCheckpointBack) {
  const TempDir dir("gguf_import_hybrid");
  for (const Case& k : cases())
    for (bool zero_centered : {false, true}) {
      SCOPED_TRACE(std::string(k.arch) + (zero_centered ? " zero-centred" : " plain") + " " + k.config.dump());
      const Checkpoint ck = random_checkpoint(k.config, zero_centered, 21);
      const std::string path = (dir / "model.gguf").string();
      export_gguf(ck, kernels::ElementType::f32, kByteVocabulary, path, k.arch);
      const ImportedGguf back = import_gguf(path);
      EXPECT_EQ(back.architecture, k.arch);
      // The file's value-head order is kept (qwen35's tiled, qwen3next's grouped): the same
      // model as ck, which it gives back when turned into ck's order.
      const model::ValueHeadOrder file_order = std::string(k.arch) == "qwen3next" ? model::ValueHeadOrder::grouped
                                                                                   : model::ValueHeadOrder::tiled;
      EXPECT_EQ(back.checkpoint.config.linear_attention.value_head_order, file_order);
      Checkpoint grouped = back.checkpoint;
      model::reorder_value_heads(grouped.config, grouped.params, model::ValueHeadOrder::grouped);
      EXPECT_EQ(model::config_to_json(grouped.config), model::config_to_json(ck.config));
      ASSERT_EQ(grouped.params.size(), ck.params.size());
      const model::ParamLayout layout(ck.config);
      size_t rounded = 0;
      for (const model::ParamSpec& s : layout.specs())
        for (int64_t i = s.offset; i < s.offset + s.numel; ++i) {
          const float want = ck.params[i], got = grouped.params[i];
          if (!mapped(s, ck.config)) ASSERT_EQ(got, want) << s.name << "[" << i - s.offset << "]";
          else ASSERT_NEAR(got, want, 4e-7) << s.name << "[" << i - s.offset << "]";
          rounded += got != want;
        }
      EXPECT_GT(rounded, 0u) << "no value went through a function: the check says nothing";
      // The imported checkpoint is the file's model exactly: it exports to the same bytes.
      const std::string again = (dir / "again.gguf").string();
      export_gguf(back.checkpoint, kernels::ElementType::f32, kByteVocabulary, again, k.arch);
      EXPECT_EQ(testing::read_file(again), testing::read_file(path));
      // Either order of the same model writes the same file in every architecture.
      Checkpoint other = ck;
      model::reorder_value_heads(other.config, other.params, model::ValueHeadOrder::tiled);
      ASSERT_NE(other.params, ck.params);
      export_gguf(other, kernels::ElementType::f32, kByteVocabulary, again, k.arch);
      EXPECT_EQ(testing::read_file(again), testing::read_file(path));
    }
}

TEST(GgufImportHybrid, F16FilesComeBackWithinOneRounding) {
  const TempDir dir("gguf_import_hybrid");
  for (const Case& k : cases()) {
    SCOPED_TRACE(k.arch);
    const Checkpoint ck = random_checkpoint(k.config, true, 22);
    const std::string path = (dir / "model.gguf").string();
    export_gguf(ck, kernels::ElementType::f16, kByteVocabulary, path, k.arch);
    Checkpoint back = import_gguf(path).checkpoint;
    model::reorder_value_heads(back.config, back.params, model::ValueHeadOrder::grouped);
    EXPECT_EQ(model::config_to_json(back.config), model::config_to_json(ck.config));
    for (size_t i = 0; i < ck.params.size(); ++i)
      ASSERT_LE(std::fabs(back.params[i] - ck.params[i]), std::ldexp(std::fabs(ck.params[i]), -11) + 4e-7) << i;
  }
}

TEST(GgufImportHybrid, Qwen3NextIsAskedForAndHoldsOnlyWhatItCan) {
  const Checkpoint dense = random_checkpoint(hybrid_config(json::object()), true, 23);
  const std::string no_experts = testing::error_of([&] { (void)resolve_gguf_architecture(dense.config, "qwen3next"); });
  EXPECT_TRUE(testing::contains(no_experts, "--gguf-arch qwen3next")) << no_experts;
  EXPECT_TRUE(testing::contains(no_experts, "zero experts")) << no_experts;
  const Checkpoint sparse = random_checkpoint(hybrid_config(moe(1)), true, 23);
  EXPECT_EQ(resolve_gguf_architecture(sparse.config, "auto"), "qwen35moe");
  EXPECT_EQ(resolve_gguf_architecture(sparse.config, "qwen3next"), "qwen3next");
  const std::string dense_arch = testing::error_of([&] { (void)resolve_gguf_architecture(sparse.config, "qwen35"); });
  EXPECT_TRUE(testing::contains(dense_arch, "dense FFNs only")) << dense_arch;
  const std::string unknown = testing::error_of([&] { (void)resolve_gguf_architecture(sparse.config, "mamba"); });
  EXPECT_TRUE(testing::contains(unknown, "--gguf-arch mamba")) << unknown;
  json ungated = hybrid_config(moe(1));
  ungated.erase("gate");
  ungated.erase("full_attention_interval");
  ungated.erase("linear_attention");
  const Checkpoint plain = random_checkpoint(ungated, false, 23);
  const std::string no_gate = testing::error_of([&] { (void)resolve_gguf_architecture(plain.config, "qwen3next"); });
  EXPECT_TRUE(testing::contains(no_gate, "G1")) << no_gate;
}

// The tensor `name` of ts, checking that no tensor's name holds one of `absent` (the parts
// the fused tensor replaces).
const GgufTensor* fused(const std::vector<GgufTensor>& ts, const std::string& name, std::initializer_list<const char*> absent) {
  const GgufTensor* found = nullptr;
  for (const GgufTensor& t : ts) {
    for (const char* part : absent) EXPECT_EQ(t.name.find(part), std::string::npos) << t.name;
    if (t.name == name) found = &t;
  }
  return found;
}

// A tensor's values as its runs make them (no zero runs here).
std::vector<float> values_of(const GgufTensor& t, const std::vector<float>& params) {
  std::vector<float> v;
  for (const GgufRun& r : t.runs) v.insert(v.end(), params.begin() + r.spec->offset + r.begin,
                                           params.begin() + r.spec->offset + r.begin + r.count);
  return v;
}

// Older qwen3next files: q, k, v and z in one ssm_in, per key head (q, k, its r value heads'
// v rows, their z rows); import reads them (detected by the tensor) as the split form.
TEST(GgufImportHybrid, Qwen3NextFusedSsmInIsReadAsTheSplitForm) {
  const TempDir dir("gguf_import_hybrid");
  const Checkpoint ck = random_checkpoint(hybrid_config(moe(1)), true, 25);
  const model::ParamLayout layout(ck.config);
  const std::vector<GgufTensor> ts = gguf_tensors(layout, ck.config, "qwen3next", true);
  const GgufTensor* in = fused(ts, "blk.0.ssm_in.weight", {"attn_qkv", "attn_gate"});
  ASSERT_NE(in, nullptr);
  EXPECT_EQ(in->shape, (std::vector<int64_t>{2 * 16 + 2 * 32, 32}));
  // Key head 1's block (rows 48..95): q rows 8..15, k rows 16+8..16+15, v rows 32+16..32+31 of
  // in_proj_qkv, then z rows 16..31 of in_proj_z.
  const std::vector<float> rows = values_of(*in, ck.params);
  const model::ParamSpec& qkv = layout.at("model.layers.0.linear_attn.in_proj_qkv.weight");
  const model::ParamSpec& z = layout.at("model.layers.0.linear_attn.in_proj_z.weight");
  const auto row = [&](const model::ParamSpec& s, int64_t r) { return ck.params[s.offset + r * 32 + 5]; };
  EXPECT_EQ(rows[(48 + 0) * 32 + 5], row(qkv, 8));
  EXPECT_EQ(rows[(48 + 8) * 32 + 5], row(qkv, 24));
  EXPECT_EQ(rows[(48 + 16) * 32 + 5], row(qkv, 48));
  EXPECT_EQ(rows[(48 + 32) * 32 + 5], row(z, 16));
  ::setenv("GATEDLM_GGUF_QWEN3NEXT_SSM_IN", "1", 1);
  const std::string path = (dir / "fused.gguf").string();
  export_gguf(ck, kernels::ElementType::f32, kByteVocabulary, path, "qwen3next");
  ::unsetenv("GATEDLM_GGUF_QWEN3NEXT_SSM_IN");
  const ImportedGguf fused = import_gguf(path);
  export_gguf(ck, kernels::ElementType::f32, kByteVocabulary, path, "qwen3next");
  EXPECT_EQ(fused.checkpoint.params, import_gguf(path).checkpoint.params);
}

// qwen3next's tensors: value heads in grouped order (no tiling), beta and alpha fused per key
// head into ssm_ba, no rope sections.
TEST(GgufImportHybrid, Qwen3NextKeepsGroupedHeadsAndFusesBetaAlpha) {
  const Checkpoint ck = random_checkpoint(hybrid_config(moe(1)), true, 24);
  const model::ParamLayout layout(ck.config);
  const std::vector<GgufTensor> ts = gguf_tensors(layout, ck.config, "qwen3next");
  const GgufTensor* ba = fused(ts, "blk.2.ssm_ba.weight", {"ssm_beta", "ssm_alpha"});
  ASSERT_NE(ba, nullptr);
  EXPECT_EQ(ba->shape, (std::vector<int64_t>{8, 32}));
  const model::ParamSpec& b = layout.at("model.layers.2.linear_attn.in_proj_b.weight");
  const model::ParamSpec& a = layout.at("model.layers.2.linear_attn.in_proj_a.weight");
  const std::vector<float> rows = values_of(*ba, ck.params);
  // Key head j (r = 2): beta rows 2j, 2j+1, then alpha rows 2j, 2j+1.
  for (int64_t j = 0; j < 2; ++j)
    for (int64_t m = 0; m < 2; ++m)
      for (int64_t col = 0; col < 32; ++col) {
        ASSERT_EQ(rows[((4 * j) + m) * 32 + col], ck.params[b.offset + (2 * j + m) * 32 + col]);
        ASSERT_EQ(rows[((4 * j) + 2 + m) * 32 + col], ck.params[a.offset + (2 * j + m) * 32 + col]);
      }
  for (const GgufTensor& t : ts)
    if (t.name == "blk.0.ssm_out.weight") {
      for (size_t i = 1; i < t.runs.size(); ++i)  // the columns as they are: each run where the last ended
        ASSERT_EQ(t.runs[i].begin, t.runs[i - 1].begin + t.runs[i - 1].count) << i;
    }
  for (const GgufArchKey& k : gguf_arch_keys(ck.config, "qwen3next")) EXPECT_NE(k.key, "rope.dimension_sections");
}

}  // namespace
}  // namespace gatedlm::io
