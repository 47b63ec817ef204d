// analysis/report_inputs.h: a run directory's metrics.jsonl read through the one reader
// (train/metrics_log.h) into curves, probes, spikes and the run's tokens/s; labels made
// unique.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "analysis/report_inputs.h"
#include "core/error.h"

namespace gatedlm::analysis {
namespace {

namespace fs = std::filesystem;

fs::path run_with_metrics(const std::string& name, const std::string& metrics) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("report_inputs_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "metrics.jsonl") << metrics;
  return dir;
}

TEST(ReportInputs, ARunsMetricsBecomeCurvesProbesSpikesAndItsThroughput) {
  const fs::path dir = run_with_metrics(
      "whole", R"({"step":1,"loss":5.0,"tokens_per_s":100.0})"
               "\n"
               R"({"step":2,"loss":9.0,"tokens_per_s":300.0,"spike":true})"
               "\n"
               R"({"step":2,"val_loss":4.5,"val_ppl":90.0,"val_bpb":6.5})"
               "\n"
               R"({"step":2,"f_attn":0.4,"sink_rate_percent":25,"m_act":30,"gate_mean":null})"
               "\n"
               R"({"step":3,"lo)");  // cut short: dropped, with a warning
  std::vector<std::string> warnings;
  const ReportRun r = load_report_run(dir.string(), warnings);
  EXPECT_TRUE(r.is_dir);
  EXPECT_TRUE(r.has_metrics);
  EXPECT_EQ(r.label, "report_inputs_whole");
  ASSERT_EQ(r.train.size(), 2u);
  EXPECT_EQ(r.train[1], (std::pair<double, double>{2, 9.0}));
  EXPECT_EQ(r.spike_steps, (std::set<int64_t>{2}));
  ASSERT_EQ(r.val.size(), 1u);
  EXPECT_EQ(r.last_eval["val_bpb"], 6.5);
  ASSERT_EQ(r.probes.size(), 1u);
  EXPECT_EQ(r.probes[0].m_act, 30);
  EXPECT_TRUE(std::isnan(r.probes[0].gate_mean));
  ASSERT_TRUE(r.tokens_per_s.has_value());
  EXPECT_NEAR(*r.tokens_per_s, 2.0 / (1.0 / 100 + 1.0 / 300), 1e-9);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("metrics.jsonl:5"), std::string::npos) << warnings[0];
  fs::remove_all(dir);
}

TEST(ReportInputs, ADamagedLineBeforeTheLastIsAnErrorNamingTheFile) {
  const fs::path dir = run_with_metrics("damaged", "{\"step\":1,\"loss\":5.0}\nnot json\n{\"step\":2,\"loss\":4.0}\n");
  std::vector<std::string> warnings;
  try {
    load_report_run(dir.string(), warnings);
    FAIL() << "a damaged metrics.jsonl was read past";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find((dir / "metrics.jsonl").string() + ":2"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

TEST(ReportInputs, RepeatedLabelsAreNumberedAndColoursGoByPosition) {
  std::vector<ReportRun> runs(3);
  runs[0].label = "run";
  runs[1].label = "run";
  runs[2].label = "other";
  label_and_colour(runs);
  EXPECT_EQ(runs[0].label, "run (1)");
  EXPECT_EQ(runs[1].label, "run (2)");
  EXPECT_EQ(runs[2].label, "other");
  EXPECT_EQ(runs[0].color, "#1f77b4");
  EXPECT_NE(runs[1].color, runs[0].color);
}

}  // namespace
}  // namespace gatedlm::analysis
