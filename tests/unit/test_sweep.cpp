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

namespace gatedlm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::contains;
using testing::error_of;
using testing::run_gatedlm;

json tiny_spec() {
  return json{{"base", {{"d_model", 32}, {"n_layers", 2}, {"n_heads", 2}, {"n_kv_heads", 1}, {"head_dim", 16},
                        {"ffn_hidden", 64}, {"max_seq_len", 32}}},
              {"train", {{"batch_size", 4}, {"seq_len", 32}, {"lr", 3e-3}, {"min_lr", 3e-4}, {"eval_tokens", 256}}},
              {"tokens", 2048},
              {"seeds", {1, 2}},
              {"final_windows", 3},
              {"heldout_tokens", 256},
              {"variants",
               {{{"name", "baseline"}},
                {{"name", "g1"}, {"label", "G1 gated"}, {"model", {{"gate", {{"position", "sdpa"}}}}}}}}};
}

std::string spec_error(const json& j) {
  return error_of([&] { sweep::parse_spec(j, "spec.json", ""); });
}

TEST(SweepSpec, BadSpecsAreRefusedNamingTheProblem) {
  json j = tiny_spec();
  j["tokenz"] = 5;
  EXPECT_TRUE(contains(spec_error(j), "unknown key \"tokenz\"")) << spec_error(j);
  j = tiny_spec();
  j.erase("tokens");
  EXPECT_TRUE(contains(spec_error(j), "\"tokens\"")) << spec_error(j);
  j = tiny_spec();
  j["train"]["steps"] = 10;
  EXPECT_TRUE(contains(spec_error(j), "\"steps\" is planned by the sweep")) << spec_error(j);
  j = tiny_spec();
  j["variants"][1]["name"] = "baseline";
  EXPECT_TRUE(contains(spec_error(j), "\"baseline\" is used twice")) << spec_error(j);
  j = tiny_spec();
  j["variants"][1]["name"] = "g1/../x";
  EXPECT_TRUE(contains(spec_error(j), "may hold only letters")) << spec_error(j);
  j = tiny_spec();
  j["variants"][1]["match"] = "wider";
  EXPECT_TRUE(contains(spec_error(j), "\"match\" must be")) << spec_error(j);
  j = tiny_spec();
  j["variants"][1]["baseline"] = "nope";
  EXPECT_TRUE(contains(spec_error(j), "no variant named \"nope\"")) << spec_error(j);
  j = tiny_spec();
  j["seeds"] = {1, 1};
  EXPECT_TRUE(contains(spec_error(j), "listed twice")) << spec_error(j);
  j = tiny_spec();
  j["variants"][1]["train"] = {{"seed", 3}};
  EXPECT_TRUE(contains(spec_error(j), "\"seed\" is planned by the sweep")) << spec_error(j);
  j = tiny_spec();
  j["variants"] = {"does_not_exist.json"};
  EXPECT_TRUE(contains(spec_error(j), "does_not_exist.json")) << spec_error(j);
  // A patch that makes an impossible model names the variant and the key.
  j = tiny_spec();
  j["variants"][1]["model"] = {{"gate", {{"position", "key"}, {"granularity", "headwise"}}}};
  const sweep::SweepSpec s = sweep::parse_spec(j, "spec.json", "");
  const std::string e = error_of([&] { sweep::plan_variants(s, 258); });
  EXPECT_TRUE(contains(e, "variant \"g1\"") && contains(e, "gate.granularity")) << e;
}

TEST(SweepSpec, VariantFilesAreMergePatchesRelativeToTheSpec) {
  testing::TempDir dir("sweep_spec");
  testing::write_file(dir / "moe.json", R"({"name": "wide", "model": {"ffn_hidden": 128}, "match": "none"})");
  json j = tiny_spec();
  j["variants"].push_back("moe.json");
  testing::write_file(dir / "spec.json", j.dump());
  const sweep::SweepSpec s = sweep::load_spec_file((dir / "spec.json").string());
  ASSERT_EQ(s.variants.size(), 3u);
  const sweep::Plan plan = sweep::plan_variants(s, 258);
  EXPECT_EQ(plan.find("wide").config.ffn_hidden, 128);
  EXPECT_EQ(plan.find("wide").config.d_model, 32);  // the rest of the base kept
}

TEST(SweepSpec, Table1ParameterCountsAreMatchedByTheFfnWidth) {
  const sweep::SweepSpec s = sweep::load_spec_file(std::string(GATEDLM_SOURCE_DIR) + "/configs/sweep/table1.json");
  const sweep::Plan plan = sweep::plan_variants(s, 1024);
  const model::ModelConfig& b = plan.base;
  const int64_t per_column = 3 * b.d_model * b.n_layers;  // gate, up and down projections
  EXPECT_GE(plan.variants.size(), 20u);
  for (const sweep::PlannedVariant& v : plan.variants) {
    const std::string& n = v.variant.name;
    EXPECT_EQ(v.params, model::ParamLayout(v.config).total()) << n;
    if (n == "kv-heads" || n == "q-heads") {  // the parameter-expansion baselines add parameters
      EXPECT_GT(v.params, plan.base_params) << n;
      EXPECT_EQ(v.config.ffn_hidden, b.ffn_hidden) << n;
    } else if (n == "wider-ffn") {  // as many parameters more as the G1 elementwise gate adds
      const int64_t gate = plan.find("g1-elementwise").gate_params;
      EXPECT_EQ(gate, b.n_layers * b.d_model * b.n_heads * b.head_dim);
      EXPECT_GT(v.config.ffn_hidden, b.ffn_hidden);
      EXPECT_LE(std::llabs(v.params - (plan.base_params + gate)), per_column / 2) << n;
    } else {
      EXPECT_LE(std::llabs(v.params - plan.base_params), per_column / 2) << n << ": " << v.params;
    }
  }
  // The gated variants gave up FFN columns for their gates.
  EXPECT_LT(plan.find("g1-elementwise").config.ffn_hidden, b.ffn_hidden);
  EXPECT_EQ(plan.find("g1-headwise-lowdim-zero").config.gate.input_dims, 12);
  EXPECT_EQ(plan.find("g1-headwise-lowdim-zero").config.gate.init, model::GateInit::zero);
  // A gate larger than the whole FFN cannot be matched: said, with the way out.
  json j = tiny_spec();
  j["base"]["ffn_hidden"] = 1;
  const sweep::SweepSpec small = sweep::parse_spec(j, "spec.json", "");
  const std::string e = error_of([&] { sweep::plan_variants(small, 258); });
  EXPECT_TRUE(contains(e, "narrower than one column") && contains(e, "\"match\": \"none\"")) << e;
}

TEST(SweepSpec, PresetsShareVariantsAndPairLearningRates) {
  const std::string dir = std::string(GATEDLM_SOURCE_DIR) + "/configs/sweep/";
  // The smoke-sized table1 runs table1's variants on its own base and budget.
  const sweep::SweepSpec smoke = sweep::load_spec_file(dir + "table1-smoke.json");
  const sweep::SweepSpec full = sweep::load_spec_file(dir + "table1.json");
  ASSERT_EQ(smoke.variants.size(), full.variants.size());
  EXPECT_EQ(smoke.variants.back().model, full.variants.back().model);
  EXPECT_NE(smoke.base, full.base);
  EXPECT_EQ(smoke.baseline, "baseline");
  // lr-stability: 12 layers; each gated run is compared with the baseline at its own rate.
  const sweep::SweepSpec lr = sweep::load_spec_file(dir + "lr-stability.json");
  const sweep::Plan plan = sweep::plan_variants(lr, 1024);
  EXPECT_GE(plan.base.n_layers, 12);
  for (const char* m : {"1x", "2x", "4x", "8x"}) {
    const sweep::Variant& g = plan.find(std::string("g1-lr") + m).variant;
    const sweep::Variant& b = plan.find(std::string("baseline-lr") + m).variant;
    EXPECT_EQ(g.compare_to, b.name);
    EXPECT_EQ(sweep::train_config_for(lr, g, 1).lr, sweep::train_config_for(lr, b, 1).lr);
  }
  EXPECT_DOUBLE_EQ(sweep::train_config_for(lr, plan.find("g1-lr8x").variant, 1).lr,
                   8 * sweep::train_config_for(lr, plan.find("g1-lr1x").variant, 1).lr);
  json j = tiny_spec();
  j["variants_from"] = "x.json";
  EXPECT_TRUE(contains(spec_error(j), "not both")) << spec_error(j);
}

TEST(SweepSpec, EveryRunGetsTheSameScheduleForItsSeed) {
  const sweep::SweepSpec s = sweep::parse_spec(tiny_spec(), "spec.json", "");
  const train::TrainConfig a = sweep::train_config_for(s, s.variants[0], 7);
  const train::TrainConfig g = sweep::train_config_for(s, s.variants[1], 7);
  EXPECT_EQ(a.steps, 16);  // 2048 tokens / (4 x 32)
  EXPECT_EQ(a.seed, 7u);
  EXPECT_EQ(train::train_config_to_json(a), train::train_config_to_json(g));
}

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
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.output, "--seeds: \"x\"")) << r.output;
  r = run_gatedlm({"sweep", "--spec", spec.string(), "--out", (root_ / "x").string(), "--data",
                   (root_ / "data").string(), "--only", "nope"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.output, "no variant named \"nope\"")) << r.output;
}

}  // namespace
}  // namespace gatedlm
