// GGUF export of MoE models: the file's tensor table (read back here from the bytes) has
// llama.cpp's qwen3moe names and shapes, each stacked expert tensor holds the experts'
// matrices in order, and the settings qwen3moe cannot run are refused by key with nothing
// written. llama.cpp itself runs the export in tests/reference/test_gguf_llama.py.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "gguf_test_reader.h"
#include "io/gguf.h"
#include "model/param_layout.h"
#include "test_util.h"

namespace gatedlm::io {
namespace {

// ffn_hidden: the dense layers' width (0 when every layer is an MoE layer).
model::ModelConfig moe_config(const nlohmann::json& moe, int64_t ffn_hidden = 0) {
  nlohmann::json j{{"vocab_size", kByteVocabularySize}, {"d_model", 8},  {"n_layers", 2},             {"n_heads", 2},
                   {"n_kv_heads", 1},  {"head_dim", 4}, {"ffn_hidden", ffn_hidden}, {"max_seq_len", 16}, {"moe", moe}};
  return model::config_from_json(j, "test");
}

// A GGUF file's tensors: name -> (dims innermost first, float data), for F32 files.
struct GgufRead {
  std::string architecture;
  std::map<std::string, std::pair<std::vector<uint64_t>, std::vector<float>>> tensors;
};

GgufRead read_gguf(const std::string& path) {
  const testing::GgufTestFile file = testing::read_gguf_for_test(path);
  GgufRead r{file.architecture, {}};
  for (const auto& [name, t] : file.tensors) r.tensors[name] = {t.dims, t.floats()};
  return r;
}

TEST(GgufMoe, ExpertsAreStackedUnderQwen3MoeNames) {
  Checkpoint ck{moe_config({{"n_experts", 3}, {"top_k", 2}, {"expert_hidden", 6}}), {}};
  const model::ParamLayout layout(ck.config);
  ck.params = testing::random_vector<float>(layout.total(), 5);
  const std::string path = (std::filesystem::path(::testing::TempDir()) / "moe.gguf").string();
  export_gguf(ck, kernels::ElementType::f32, kByteVocabulary, path);
  const GgufRead g = read_gguf(path);  // read whole into memory
  std::filesystem::remove(path);
  EXPECT_EQ(g.architecture, "qwen3moe");
  auto values = [&](const std::string& name) {
    const model::ParamSpec* s = layout.find(name);
    EXPECT_NE(s, nullptr) << name;
    return std::vector<float>(ck.params.begin() + s->offset, ck.params.begin() + s->offset + s->numel);
  };
  for (int layer = 0; layer < 2; ++layer) {
    const std::string blk = "blk." + std::to_string(layer) + ".", ours = "model.layers." + std::to_string(layer) + ".mlp.";
    ASSERT_TRUE(g.tensors.count(blk + "ffn_gate_inp.weight"));
    EXPECT_EQ(g.tensors.at(blk + "ffn_gate_inp.weight").first, (std::vector<uint64_t>{8, 3}));
    EXPECT_EQ(g.tensors.at(blk + "ffn_gate_inp.weight").second, values(ours + "gate.weight"));
    for (const auto& [kind, dims] : std::map<std::string, std::vector<uint64_t>>{
             {"gate", {8, 6, 3}}, {"up", {8, 6, 3}}, {"down", {6, 8, 3}}}) {
      const std::string name = blk + "ffn_" + kind + "_exps.weight";
      ASSERT_TRUE(g.tensors.count(name)) << name;
      EXPECT_EQ(g.tensors.at(name).first, dims) << name;
      std::vector<float> stacked;
      for (int e = 0; e < 3; ++e) {
        const auto v = values(ours + "experts." + std::to_string(e) + "." + kind + "_proj.weight");
        stacked.insert(stacked.end(), v.begin(), v.end());
      }
      EXPECT_EQ(g.tensors.at(name).second, stacked) << name;
    }
    EXPECT_FALSE(g.tensors.count(blk + "ffn_gate.weight"));
  }
}

TEST(GgufMoe, SettingsQwen3MoeCannotRunAreRefusedByKey) {
  const std::string path = (std::filesystem::path(::testing::TempDir()) / "refused.gguf").string();
  std::filesystem::remove(path);
  const std::pair<nlohmann::json, std::string> cases[] = {
      {{{"n_experts", 3}, {"top_k", 2}, {"expert_hidden", 6}, {"every", 2}}, "moe.every"},
      {{{"n_experts", 3}, {"top_k", 2}, {"expert_hidden", 6}, {"n_shared", 1}}, "moe.n_shared"},
      {{{"n_experts", 3}, {"top_k", 2}, {"expert_hidden", 6}, {"norm_topk_prob", false}}, "moe.norm_topk_prob"},
  };
  for (const auto& [moe, key] : cases) {
    const model::ModelConfig c = moe_config(moe, moe.contains("every") ? 10 : 0);
    Checkpoint ck{c, std::vector<float>(model::ParamLayout(c).total(), 0.5f)};
    try {
      export_gguf(ck, kernels::ElementType::f32, kByteVocabulary, path);
      ADD_FAILURE() << key << " was not refused";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
    EXPECT_FALSE(std::filesystem::exists(path)) << key;
  }
}

}  // namespace
}  // namespace gatedlm::io
