// Parameter counts: the gate sizes of the paper's Table 1 ("Added Param", millions) for
// its 15A2B MoE attention shape.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "model/config.h"
#include "model/param_layout.h"

namespace gatedlm::model {
namespace {

ModelConfig paper_moe_attention(const nlohmann::json& gate) {
  nlohmann::json j{{"vocab_size", 151936}, {"d_model", 2048}, {"n_layers", 24}, {"n_heads", 32},
                   {"n_kv_heads", 4},       {"head_dim", 128},  {"ffn_hidden", 768}, {"max_seq_len", 4096},
                   {"gate", gate}};
  return config_from_json(j, "test");
}

double gate_millions(const nlohmann::json& gate) {
  return static_cast<double>(ParamLayout(paper_moe_attention(gate)).count(ParamKind::gate)) / 1e6;
}

TEST(ParamsTest, Table1AddedParamColumn) {
  struct Row {
    const char* name;
    nlohmann::json gate;
    double millions;  // as printed in Table 1 (rounded)
  };
  const std::vector<Row> rows = {
      {"(5) SDPA elementwise G1", {{"position", "sdpa"}}, 201},
      {"(6) v elementwise G2", {{"position", "value"}}, 25},
      {"(7) k elementwise G3", {{"position", "key"}}, 25},
      {"(8) q elementwise G4", {{"position", "query"}}, 201},
      {"(9) dense output G5", {{"position", "dense"}}, 100},
      {"(10) SDPA headwise G1", {{"position", "sdpa"}, {"granularity", "headwise"}}, 1.6},
      {"(11) v headwise G2", {{"position", "value"}, {"granularity", "headwise"}}, 0.2},
      {"(12) SDPA head-shared G1", {{"position", "sdpa"}, {"head_shared", true}}, 201},
      {"(13) v head-shared G2", {{"position", "value"}, {"head_shared", true}}, 25},
      {"(14) SDPA additive SiLU", {{"position", "sdpa"}, {"combine", "add"}, {"activation", "silu"}}, 201},
      {"(15) SDPA elementwise SiLU", {{"position", "sdpa"}, {"activation", "silu"}}, 201},
  };
  for (const Row& r : rows) {
    const double got = gate_millions(r.gate);
    // Table 1 prints whole millions above 10 M (100.66 M shows as 100) and one decimal below.
    const double precision = r.millions >= 10 ? 1.0 : 0.05;
    EXPECT_LT(std::abs(got - r.millions), precision) << r.name << ": " << got << " M";
  }
  EXPECT_EQ(ParamLayout(paper_moe_attention({{"position", "none"}})).count(ParamKind::gate), 0);
}

TEST(ParamsTest, EmbeddingCountsTiedAndUntied) {
  nlohmann::json j{{"vocab_size", 100}, {"d_model", 8},  {"n_layers", 1},  {"n_heads", 2},
                   {"n_kv_heads", 1},   {"head_dim", 4}, {"ffn_hidden", 16}, {"max_seq_len", 16}};
  ParamLayout untied(config_from_json(j));
  j["tie_embeddings"] = true;
  ParamLayout tied(config_from_json(j));
  EXPECT_EQ(untied.embedding_count(), 2 * 100 * 8);
  EXPECT_EQ(tied.embedding_count(), 100 * 8);
  EXPECT_EQ(untied.total() - tied.total(), 100 * 8);
  EXPECT_EQ(tied.find("lm_head.weight"), nullptr);
}

}  // namespace
}  // namespace gatedlm::model
