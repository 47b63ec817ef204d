// gatedlm bench train / gate on a tiny config: the JSON they print, the FLOP count of the
// issue's formula, and the gate pairing (same steps for both models, ratios step by step).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli_checkpoint.h"
#include "cli_runner.h"
#include "test_files.h"

namespace gatedlm::testing {
namespace {

using nlohmann::json;

constexpr const char* kTinyConfig =
    R"({"vocab_size": 64, "d_model": 32, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "head_dim": 8,
        "ffn_hidden": 48, "max_seq_len": 32, "gate": {"position": "value", "granularity": "headwise"}})";

// Runs `gatedlm bench COMMAND` on the tiny config, batch 2 x 16, one warm-up step; the
// test fails (and the JSON is empty) unless it exits 0.
json run_bench(const std::string& command, int steps) {
  TempDir dir("bench");
  write_file(dir / "tiny.json", kTinyConfig);
  const CliResult r = run_gatedlm({"bench", command, "--config", (dir / "tiny.json").string(), "--batch-size", "2",
                                   "--seq-len", "16", "--steps", std::to_string(steps), "--warmup-steps", "1"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return r.exit_code == 0 ? last_json_line(r.output) : json::object();
}

TEST(BenchCliTest, TrainPrintsTimesAndTheFormulasFlops) {
  const json j = run_bench("train", 3);
  ASSERT_FALSE(j.empty());
  EXPECT_EQ(j["step_ms"].size(), 3u);
  EXPECT_LE(j["min_ms"].get<double>(), j["median_ms"].get<double>());
  EXPECT_LE(j["median_ms"].get<double>(), j["max_ms"].get<double>());
  // 6 * matmul_params * tokens + 12 * n_layers * seq * d_attn * tokens; the headwise value
  // gate's [n_kv_heads, d_model] projection is a matrix product too.
  const double per_layer = 32 * 32 + 2 * 16 * 32 + 32 * 32 + 2 * 32 + 3 * 48 * 32;
  const double params = 2 * per_layer + 64 * 32;
  EXPECT_EQ(j["matmul_params"].get<double>(), params);
  EXPECT_DOUBLE_EQ(j["flops_per_step"].get<double>(), 6 * params * 32 + 12.0 * 2 * 16 * 32 * 32);
}

TEST(BenchCliTest, GateTimesBothModelsStepByStepWithTheG1GateInPlaceOfTheConfigs) {
  const json j = run_bench("gate", 4);
  ASSERT_FALSE(j.empty());
  ASSERT_EQ(j["step_ratios"].size(), 4u);
  for (size_t i = 0; i < 4; ++i)
    EXPECT_DOUBLE_EQ(j["step_ratios"][i].get<double>(),
                     j["gated"]["step_ms"][i].get<double>() / j["baseline"]["step_ms"][i].get<double>());
  // The baseline drops the config's value gate; the gated model adds G1's [q_dim, d_model].
  const double base = j["baseline"]["matmul_params"].get<double>();
  EXPECT_EQ(j["gated"]["matmul_params"].get<double>() - base, 2 * 32 * 32);
  EXPECT_DOUBLE_EQ(j["flop_ratio"].get<double>(),
                   j["gated"]["flops_per_step"].get<double>() / j["baseline"]["flops_per_step"].get<double>());
  TempDir dir("bench");
  write_file(dir / "tiny.json", kTinyConfig);
  const CliResult bad = run_gatedlm({"bench", "gate", "--config", (dir / "tiny.json").string(), "--steps", "0"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_TRUE(contains(bad.output, "--steps")) << bad.output;
}

}  // namespace
}  // namespace gatedlm::testing
