// analysis/run_throughput.h: the one tokens/s figure of a run (report, demo results),
// the harmonic mean of its steps' rates, from hand-built metrics.jsonl records.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "analysis/run_throughput.h"

namespace gatedlm::analysis {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

TEST(RunThroughput, IsTheTokensOverTheTimeOfEveryStep) {
  const std::vector<json> records = {
      {{"step", 1}, {"loss", 5.0}, {"tokens_per_s", 100.0}},
      {{"step", 2}, {"loss", 4.9}, {"tokens_per_s", 100.0}},
      {{"step", 2}, {"val_loss", 4.8}, {"val_ppl", 121.0}},           // an evaluation: no rate
      {{"step", 2}, {"f_attn", 0.3}},                                  // a probe: no rate
      {{"step", 3}, {"loss", 4.7}, {"tokens_per_s", 50.0}},           // a segment that is redone ...
      {{"step", 3}, {"loss", 4.7}, {"tokens_per_s", 200.0}},          // ... after a resume: the later one counts
      {{"step", 4}, {"loss", 4.6}, {"tokens_per_s", 200.0}},
      {{"step", 5}, {"loss", 4.6}, {"tokens_per_s", 0.0}},            // a segment that only evaluated
  };
  const std::optional<double> tps = run_tokens_per_s(records);
  ASSERT_TRUE(tps.has_value());
  // 4 steps of equal tokens taking 1/100 + 1/100 + 1/200 + 1/200 seconds per token: not
  // the arithmetic mean of the rates (150), nor the last step's (200).
  EXPECT_NEAR(*tps, 4.0 / (0.01 + 0.01 + 0.005 + 0.005), 1e-9);
}

TEST(RunThroughput, NoneWithoutStepRecords) {
  EXPECT_FALSE(run_tokens_per_s(std::vector<json>{}).has_value());
  EXPECT_FALSE(run_tokens_per_s(std::vector<json>{{{"step", 1}, {"val_loss", 3.0}}}).has_value());
  const fs::path dir = fs::path(::testing::TempDir()) / "run_throughput_missing";
  fs::create_directories(dir);
  EXPECT_FALSE(run_tokens_per_s(dir).has_value());  // no metrics.jsonl
  fs::remove_all(dir);
}

TEST(RunThroughput, ReadsARunDirectorysMetricsLog) {
  const fs::path dir = fs::path(::testing::TempDir()) / "run_throughput_dir";
  fs::create_directories(dir);
  {
    std::ofstream m(dir / "metrics.jsonl");
    m << R"({"step":1,"loss":5.0,"tokens_per_s":300.0})" << "\n"
      << R"({"step":2,"loss":4.9,"tokens_per_s":100.0})" << "\n"
      << R"({"step":3,"lo)";  // cut short by a crash: dropped by the reader's policy
  }
  const std::optional<double> tps = run_tokens_per_s(dir);
  ASSERT_TRUE(tps.has_value());
  EXPECT_NEAR(*tps, 2.0 / (1.0 / 300 + 1.0 / 100), 1e-9);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gatedlm::analysis
