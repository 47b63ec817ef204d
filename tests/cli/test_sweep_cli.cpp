// gatedlm sweep: spec errors name what is wrong, parameter counts are matched by the FFN
// width as the paper matched them, and a tiny sweep through the real binary runs,
// aggregates its runs into paired statistics, reuses finished runs and continues an
// interrupted one.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "analysis/report.h"
#include "cli_runner.h"
#include "model/param_layout.h"
#include "sweep/spec.h"
#include "sweep/stats.h"
#include "test_files.h"
#include "tiny_training_data.h"
#include "test_fixtures.h"

namespace gatedlm {
namespace {

using testing::tiny_spec;

namespace fs = std::filesystem;
using nlohmann::json;
using testing::contains;
using testing::error_of;
using testing::run_gatedlm;

class SweepCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = fs::temp_directory_path() / ("gatedlm_sweep_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
    auto r = testing::make_tiny_training_data(root_);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }
  static fs::path write_spec(const std::string& name, const json& j) {
    const fs::path p = root_ / name;
    std::ofstream(p) << j.dump(2);
    return p;
  }
  static json read(const fs::path& p) { return json::parse(testing::read_file(p)); }
  static fs::path root_;
};
fs::path SweepCliTest::root_;

TEST_F(SweepCliTest, RunsAggregatesAndReusesFinishedRuns) {
  const fs::path spec = write_spec("spec.json", tiny_spec()), out = root_ / "out";
  const std::vector<std::string> args{"sweep", "--spec", spec.string(), "--out", out.string(), "--data",
                                      (root_ / "data").string(), "--heldout", (root_ / "corpus.txt").string(),
                                      "--no-report"};
  auto r = run_gatedlm(args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Every parameter count printed, and the table.
  EXPECT_TRUE(contains(r.output, "baseline") && contains(r.output, "G1 sdpa elementwise")) << r.output;
  EXPECT_TRUE(contains(r.output, "| G1 gated |")) << r.output;
  const json sw = read(out / "sweep.json");
  ASSERT_EQ(sw["variants"].size(), 2u);
  const json& base = sw["variants"][0];
  const json& g1 = sw["variants"][1];
  EXPECT_EQ(g1["compare_to"], "baseline");
  EXPECT_LT(std::llabs(g1["params"].get<int64_t>() - base["params"].get<int64_t>()), 3 * 32 * 2);
  // The statistics are those of the runs' own numbers.
  std::vector<double> bv, gv;
  for (int i = 0; i < 2; ++i) {
    const json rb = read(out / "runs/baseline" / ("seed-" + std::to_string(i + 1)) / "result.json");
    const json rg = read(out / "runs/g1" / ("seed-" + std::to_string(i + 1)) / "result.json");
    bv.push_back(rb["val_bpb"].get<double>());
    gv.push_back(rg["val_bpb"].get<double>());
    EXPECT_TRUE(rg["gate_mean"].is_number());
    EXPECT_TRUE(rb["gate_mean"].is_null());
    EXPECT_TRUE(rb["heldout_bpb"].is_number() && rb["f_attn"].is_number() && rb["m_act"].is_number());
    EXPECT_EQ(rb["steps"], 16);
  }
  // Seeds differ, so runs differ; the same seed gives both variants the same first batch.
  EXPECT_NE(bv[0], bv[1]);
  EXPECT_NEAR(base["stats"]["val_bpb"]["mean"].get<double>(), (bv[0] + bv[1]) / 2, 1e-12);
  EXPECT_NEAR(base["stats"]["val_bpb"]["std"].get<double>(), std::abs(bv[0] - bv[1]) / std::sqrt(2.0), 1e-12);
  const sweep::PairedDifference d = sweep::paired_difference(gv, bv);
  const json& dj = g1["vs_baseline"]["metrics"]["val_bpb"];
  EXPECT_EQ(dj["n"], 2);
  EXPECT_NEAR(dj["mean"].get<double>(), ((gv[0] - bv[0]) + (gv[1] - bv[1])) / 2, 1e-12);
  EXPECT_NEAR(dj["ci_low"].get<double>(), d.ci_low, 1e-12);
  EXPECT_TRUE(fs::exists(out / "sweep.md"));
  // The report's sweep page: the table and the figures per variant.
  if (!analysis::find_gnuplot().empty()) {
    r = run_gatedlm({"report", out.string(), "--out", (root_ / "sweep_report").string()});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::string html = testing::read_file(root_ / "sweep_report/index.html");
    EXPECT_TRUE(contains(html, "<h2>Sweep") && contains(html, "G1 gated")) << html.substr(0, 2000);
    EXPECT_TRUE(fs::exists(root_ / "sweep_report/figures/sweep0_val_bpb.png"));
    EXPECT_TRUE(fs::exists(root_ / "sweep_report/figures/sweep0_delta_bpb.svg"));
    EXPECT_TRUE(contains(html, "g1 seed 1"));  // the first seed's training curves
  }

  // Again: everything reused, nothing retrained.
  const auto before = fs::last_write_time(out / "runs/g1/seed-2/result.json");
  r = run_gatedlm(args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "0 runs trained, 4 reused")) << r.output;
  EXPECT_EQ(fs::last_write_time(out / "runs/g1/seed-2/result.json"), before);

  // A changed budget changes the runs' keys: they are trained again.
  std::vector<std::string> more = args;
  more.insert(more.end(), {"--tokens", "2560", "--only", "g1", "--seeds", "1"});
  r = run_gatedlm(more);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "2 runs trained")) << r.output;  // g1 and its baseline, seed 1
  EXPECT_EQ(read(out / "runs/g1/seed-1/result.json")["steps"], 20);
}

TEST_F(SweepCliTest, AnInterruptedSweepContinuesWhereItStopped) {
  json j = tiny_spec();
  j["tokens"] = 4 * 32 * 1000;  // 1000 steps per run: long enough to be interrupted
  j["seeds"] = {1};
  const fs::path spec = write_spec("long.json", j), out = root_ / "long";
  const std::vector<std::string> args{"sweep", "--spec", spec.string(), "--out", out.string(),
                                      "--data", (root_ / "data").string(), "--no-report"};
  const pid_t pid = testing::spawn_gatedlm(args, (root_ / "long.log").string());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!fs::exists(out / "runs/g1/seed-1/latest") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ::kill(pid, SIGINT);
  ASSERT_EQ(testing::wait_exit_code(pid), 130) << testing::read_file(root_ / "long.log");
  ASSERT_TRUE(fs::exists(out / "runs/baseline/seed-1/result.json"));
  ASSERT_FALSE(fs::exists(out / "runs/g1/seed-1/result.json")) << "the sweep ended before it could be interrupted";
  auto r = run_gatedlm(args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "g1 seed 1 (resuming)")) << r.output;
  EXPECT_TRUE(contains(r.output, "1 runs trained, 1 reused")) << r.output;
  EXPECT_EQ(read(out / "runs/g1/seed-1/result.json")["steps"], 1000);
}

TEST_F(SweepCliTest, PlanPrintsCountsAndBadInputIsRefused) {
  const fs::path spec = write_spec("plan.json", tiny_spec());
  auto r = run_gatedlm({"sweep", "--spec", spec.string(), "--out", (root_ / "plan").string(), "--data",
                        (root_ / "data").string(), "--plan"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json plan = read(root_ / "plan" / "plan.json");
  EXPECT_EQ(plan["variants"][1]["params"].get<int64_t>(), model::ParamLayout(model::config_from_json(
                                                              plan["variants"][1]["config"], "x")).total());
  EXPECT_FALSE(fs::exists(root_ / "plan" / "runs"));
  EXPECT_TRUE(contains(r.output, std::to_string(plan["variants"][0]["params"].get<int64_t>()).substr(0, 2)));

  r = run_gatedlm({"sweep", "--spec", spec.string(), "--out", (root_ / "x").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.output, "no data: give --data DIR")) << r.output;
  r = run_gatedlm({"sweep", "--preset", "no-such-preset", "--out", (root_ / "x").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.output, "no preset \"no-such-preset\"")) << r.output;
  r = run_gatedlm({"sweep", "--spec", spec.string(), "--out", (root_ / "x").string(), "--data",
                   (root_ / "data").string(), "--seeds", "1,x"});
  EXPECT_NE(r.exit_code, 0);  // the command line's conversion error, as for every number flag
  EXPECT_TRUE(contains(r.output, "--seeds = 1,x")) << r.output;
  r = run_gatedlm({"sweep", "--spec", spec.string(), "--out", (root_ / "x").string(), "--data",
                   (root_ / "data").string(), "--only", "nope"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.output, "no variant named \"nope\"")) << r.output;
}

}  // namespace
}  // namespace gatedlm
