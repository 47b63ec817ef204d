// GGUF export of MoE models: the file's tensor table (read back here from the bytes) has
// llama.cpp's qwen3moe names and shapes, each stacked expert tensor holds the experts'
// matrices in order, and the settings qwen3moe cannot run are refused by key with nothing
// written. llama.cpp itself runs the export in tests/reference/test_gguf_llama.py.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"
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
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  size_t at = 0;
  auto get = [&](auto& v) {
    std::memcpy(&v, bytes.data() + at, sizeof(v));
    at += sizeof(v);
  };
  auto str = [&] {
    uint64_t n;
    get(n);
    std::string s = bytes.substr(at, n);
    at += n;
    return s;
  };
  uint32_t magic, version, type;
  uint64_t n_tensors, n_kv;
  get(magic), get(version), get(n_tensors), get(n_kv);
  EXPECT_EQ(magic, 0x46554747u);
  GgufRead r;
  std::function<void(uint32_t)> skip = [&](uint32_t t) {  // one value of GGUF type t
    static const std::map<uint32_t, size_t> width{{0, 1}, {1, 1}, {2, 2}, {3, 2}, {4, 4}, {5, 4},
                                                  {6, 4}, {7, 1}, {10, 8}, {11, 8}, {12, 8}};
    if (t == 8) {
      str();
    } else if (t == 9) {
      uint32_t inner;
      uint64_t n;
      get(inner), get(n);
      for (uint64_t i = 0; i < n; ++i) skip(inner);
    } else {
      at += width.at(t);
    }
  };
  for (uint64_t i = 0; i < n_kv; ++i) {
    const std::string key = str();
    get(type);
    if (key == "general.architecture") {
      r.architecture = str();
      continue;
    }
    skip(type);
  }
  std::vector<std::tuple<std::string, std::vector<uint64_t>, uint64_t>> infos;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    const std::string name = str();
    uint32_t n_dims;
    get(n_dims);
    std::vector<uint64_t> dims(n_dims);
    for (auto& d : dims) get(d);
    uint32_t ggml_type;
    uint64_t offset;
    get(ggml_type), get(offset);
    EXPECT_EQ(ggml_type, 0u) << name;  // F32
    infos.emplace_back(name, dims, offset);
  }
  const size_t data = (at + 31) / 32 * 32;
  for (const auto& [name, dims, offset] : infos) {
    uint64_t n = 1;
    for (uint64_t d : dims) n *= d;
    std::vector<float> v(n);
    std::memcpy(v.data(), bytes.data() + data + offset, n * 4);
    r.tensors[name] = {dims, v};
  }
  return r;
}

TEST(GgufMoe, ExpertsAreStackedUnderQwen3MoeNames) {
  Checkpoint ck{moe_config({{"n_experts", 3}, {"top_k", 2}, {"expert_hidden", 6}}), {}};
  const model::ParamLayout layout(ck.config);
  ck.params = testing::random_vector<float>(layout.total(), 5);
  const std::string path = (std::filesystem::path(::testing::TempDir()) / "moe.gguf").string();
  export_gguf(ck, GgufDtype::f32, kByteVocabulary, path);
  const GgufRead g = read_gguf(path);
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
      export_gguf(ck, GgufDtype::f32, kByteVocabulary, path);
      ADD_FAILURE() << key << " was not refused";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
    EXPECT_FALSE(std::filesystem::exists(path)) << key;
  }
}

}  // namespace
}  // namespace gatedlm::io
