// train --probe-every: the records appear at the right steps, hold what `gatedlm analyze`
// says of the same checkpoint and windows, and leave training's numbers untouched.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "analysis/report.h"
#include "cli_runner.h"
#include "test_files.h"
#include "tiny_training_data.h"

namespace gatedlm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::run_gatedlm;

class TrainProbeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = fs::temp_directory_path() / ("gatedlm_probes_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
    auto r = testing::make_tiny_training_data(root_);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }

  static std::vector<std::string> train_args(const fs::path& run, const fs::path& model) {
    return {"train",        "--config",   model.string(), "--data",       (root_ / "data").string(),
            "--out",        run.string(), "--steps",      "5",            "--batch-size", "4",
            "--seq-len",    "32",         "--save-every", "2",            "--keep-checkpoints", "9",
            "--eval-every", "0",          "--eval-tokens", "256",         "--warmup", "1",
            "--lr",         "3e-3"};
  }

  // step -> record, for the records holding `key`.
  static std::map<int64_t, json> records_with(const fs::path& run, const char* key) {
    std::map<int64_t, json> out;
    std::ifstream in(run / "metrics.jsonl");
    std::string line;
    while (std::getline(in, line)) {
      json j = json::parse(line);
      if (j.contains(key)) out[j["step"].get<int64_t>()] = j;
    }
    return out;
  }

  static fs::path root_;
};
fs::path TrainProbeTest::root_;

TEST_F(TrainProbeTest, RecordsAtTheRightStepsEqualAnalyzeAndLeaveTrainingUnchanged) {
  const fs::path probed = root_ / "probed", plain = root_ / "plain";
  std::vector<std::string> args = train_args(probed, root_ / "model.json");
  for (const char* a : {"--probe-every", "2", "--probe-windows", "3"}) args.push_back(a);
  auto r = run_gatedlm(args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_gatedlm(train_args(plain, root_ / "model.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;

  // Every 2 steps, and the final step 5.
  const auto probes = records_with(probed, "f_attn");
  std::vector<int64_t> steps;
  for (const auto& [s, j] : probes) steps.push_back(s);
  EXPECT_EQ(steps, (std::vector<int64_t>{2, 4, 5}));
  EXPECT_TRUE(records_with(plain, "f_attn").empty());
  for (const auto& [s, j] : probes) {
    EXPECT_EQ(j["probe_windows"], 3);
    EXPECT_EQ(j["probe_seq_len"], 32);
    EXPECT_TRUE(j["gate_mean"].is_number()) << j.dump();
    EXPECT_GT(j["f_attn"].get<double>(), 0.0);
    EXPECT_LT(j["f_attn"].get<double>(), 1.0);
  }
  // Probing does not touch the weights or the data order: the same losses, bit for bit.
  const auto losses_probed = records_with(probed, "loss"), losses_plain = records_with(plain, "loss");
  ASSERT_EQ(losses_probed.size(), 5u);
  for (const auto& [s, j] : losses_plain) EXPECT_EQ(j["loss"].dump(), losses_probed.at(s)["loss"].dump()) << s;

  // analyze of the step-4 checkpoint on the same windows (seed 0, 3 windows of 32 tokens).
  for (int64_t step : {2, 4}) {
    char name[32];
    std::snprintf(name, sizeof name, "step_%08lld", static_cast<long long>(step));
    const fs::path out = root_ / ("analysis_" + std::to_string(step) + ".json");
    r = run_gatedlm({"analyze", "--checkpoint", (probed / "checkpoints" / name).string(), "--data",
                     (root_ / "data").string(), "--sequences", "3", "--seq-len", "32", "--seed", "0", "--quiet",
                     "--out", out.string()});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const json a = json::parse(testing::read_file(out));
    const json& p = probes.at(step);
    auto near = [](double want, double got) { EXPECT_NEAR(got, want, 1e-9 * std::max(1.0, std::abs(want))); };
    near(a["f_attn"]["mean"].get<double>(), p["f_attn"].get<double>());
    near(a["sink_rate"]["percent"].get<double>(), p["sink_rate_percent"].get<double>());
    near(a["massive_activations"]["m_act"].get<double>(), p["m_act"].get<double>());
    near(a["gates"]["mean_score"].get<double>(), p["gate_mean"].get<double>());
  }
  // The report draws them over the steps.
  if (!analysis::find_gnuplot().empty()) {
    r = run_gatedlm({"report", probed.string(), plain.string(), "--out", (root_ / "report").string()});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    for (const char* f : {"probe_f_attn", "probe_sink_rate", "probe_m_act", "probe_gate_mean"})
      EXPECT_TRUE(fs::exists(root_ / "report/figures" / (std::string(f) + ".png"))) << f;
    const std::string data = testing::read_file(root_ / "report/data/probes_0.dat");
    EXPECT_NE(data.find("\n4 "), std::string::npos) << data;  // the step-4 record
  }
}

TEST_F(TrainProbeTest, BaselineHasNoGateMeanAndBadValuesAreRefused) {
  json config = json::parse(testing::read_file(root_ / "model.json"));
  config.erase("gate");
  std::ofstream(root_ / "baseline.json") << config.dump();
  const fs::path run = root_ / "baseline_run";
  std::vector<std::string> args = train_args(run, root_ / "baseline.json");
  for (const char* a : {"--probe-every", "3"}) args.push_back(a);
  auto r = run_gatedlm(args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto probes = records_with(run, "f_attn");
  ASSERT_EQ(probes.size(), 2u);  // steps 3 and 5
  EXPECT_TRUE(probes.at(3)["gate_mean"].is_null());
  EXPECT_EQ(probes.at(5)["probe_windows"], 8);

  args = train_args(root_ / "bad", root_ / "baseline.json");
  for (const char* a : {"--probe-windows", "0", "--probe-every", "2"}) args.push_back(a);
  r = run_gatedlm(args);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("probe_windows"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(root_ / "bad"));
}

}  // namespace
}  // namespace gatedlm
