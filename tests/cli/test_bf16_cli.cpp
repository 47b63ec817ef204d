// --precision bf16 through the real binary on a machine without bf16 units, made so on
// any machine by capping oneDNN at AVX2 (ONEDNN_MAX_CPU_ISA, what oneDNN sees on an AMD
// Zen 3): one warning that names the flag, the missing feature and the alternative, then
// an emulated run whose losses match the native run's where this machine has one.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_checkpoint.h"
#include "cli_runner.h"
#include "kernels/bf16_support.h"
#include "test_files.h"

namespace gatedlm::testing {
namespace {

size_t count(const std::string& s, const std::string& part) {
  size_t n = 0;
  for (size_t at = s.find(part); at != std::string::npos; at = s.find(part, at + 1)) ++n;
  return n;
}

// The training losses of metrics.jsonl, in step order.
std::vector<double> losses(const fs::path& run) {
  std::vector<double> out;
  std::ifstream in(run / "metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) out.push_back(j["loss"].get<double>());
  }
  return out;
}

class Bf16CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string text;
    for (int i = 0; i < 3000; ++i) text += (i % 7 == 0 ? "the king speaks. " : "of love and war ");
    write_file(dir_ / "corpus.txt", text);
    write_file(dir_ / "model.json",
               R"({"vocab_size": 258, "d_model": 32, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2,
                   "head_dim": 8, "ffn_hidden": 64, "max_seq_len": 32, "gate": {"position": "sdpa"}})");
    const CliResult r = run_gatedlm({"data", "prepare", "--tokenizer", "byte", "--input",
                                     (dir_ / "corpus.txt").string(), "--out", (dir_ / "data").string()});
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  CliResult train_bf16(const std::string& run) {
    return run_gatedlm({"train", "--config", (dir_ / "model.json").string(), "--data", (dir_ / "data").string(),
                        "--out", (dir_ / run).string(), "--steps", "4", "--batch-size", "2", "--seq-len", "32",
                        "--eval-every", "0", "--precision", "bf16"});
  }
  // A bf16 training run with oneDNN capped at AVX2: checks its one warning, returns its losses.
  std::vector<double> emulated_run_losses() {
    CliResult capped;
    {
      ScopedEnv avx2("ONEDNN_MAX_CPU_ISA", "AVX2");
      capped = train_bf16("capped");
    }
    EXPECT_EQ(capped.exit_code, 0) << capped.output;
    EXPECT_EQ(count(capped.output, "warning: --precision bf16"), 1u) << capped.output;
    EXPECT_TRUE(contains(capped.output, "AVX512-BF16 or AMX")) << capped.output;
    EXPECT_TRUE(contains(capped.output, "--precision fp32")) << capped.output;
    return losses(dir_ / "capped");
  }
  TempDir dir_{"bf16cli"};
};

TEST_F(Bf16CliTest, WithoutBf16UnitsTrainWarnsOnceAndRunsEmulated) {
  const std::vector<double> emulated = emulated_run_losses();
  ASSERT_EQ(emulated.size(), 4u);
  for (double loss : emulated) EXPECT_TRUE(std::isfinite(loss) && loss > 0) << loss;
  ScopedEnv avx2("ONEDNN_MAX_CPU_ISA", "AVX2");
  const CliResult version = run_gatedlm({"--version"});
  EXPECT_TRUE(contains(version.output, "bf16 products: emulated")) << version.output;
}

TEST_F(Bf16CliTest, EmulatedRunMatchesTheNativeRun) {
  if (!kernels::bf16_support().native)
    GTEST_SKIP() << "no native bf16 here to compare the emulated run with: " << kernels::bf16_support().reason;
  const std::vector<double> emulated = emulated_run_losses();
  const CliResult native = train_bf16("native");
  ASSERT_EQ(native.exit_code, 0) << native.output;
  EXPECT_FALSE(contains(native.output, "warning: --precision bf16")) << native.output;
  const std::vector<double> native_losses = losses(dir_ / "native");
  ASSERT_EQ(native_losses.size(), 4u);
  ASSERT_EQ(emulated.size(), 4u);
  // Same numerics: only the order of the fp32 sums differs between the two paths.
  for (size_t i = 0; i < emulated.size(); ++i)
    EXPECT_NEAR(emulated[i], native_losses[i], 1e-4 * std::abs(native_losses[i])) << "step " << i + 1;
}

TEST_F(Bf16CliTest, BenchReportsTheBf16PathItTimed) {
  ScopedEnv avx2("ONEDNN_MAX_CPU_ISA", "AVX2");
  const CliResult r = run_gatedlm({"bench", "train", "--config", (dir_ / "model.json").string(), "--batch-size", "2",
                                   "--seq-len", "16", "--steps", "1", "--warmup-steps", "0", "--bf16"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(count(r.output, "warning: --bf16"), 1u) << r.output;
  const auto j = last_json_line(r.output);
  EXPECT_EQ(j["precision"], "bf16");
  EXPECT_EQ(j["bf16_path"], "emulated");
}

}  // namespace
}  // namespace gatedlm::testing
