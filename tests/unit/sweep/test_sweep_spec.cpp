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

// Every preset shipped in configs/sweep/ parses and plans (each variant a valid model whose
// parameter count is matched), so a preset whose patch does not fit its base (a layer_types
// list of the wrong length, say) fails here rather than an hour into a user's sweep.
TEST(SweepSpec, EveryShippedPresetPlans) {
  int presets = 0;
  for (const auto& entry : fs::directory_iterator(std::string(GATEDLM_SOURCE_DIR) + "/configs/sweep")) {
    if (entry.path().extension() != ".json") continue;
    ++presets;
    const sweep::SweepSpec spec = sweep::load_spec_file(entry.path().string());
    const sweep::Plan plan = sweep::plan_variants(spec, 512);
    EXPECT_GE(plan.variants.size(), 2u) << entry.path();
    for (const sweep::PlannedVariant& v : plan.variants) EXPECT_GT(v.params, 0) << entry.path() << " " << v.variant.name;
  }
  EXPECT_GE(presets, 9);  // table1, table1-smoke, table6, lr-stability(-smoke), hybrid, sinks, sinks-bigram, sinks-text
}

TEST(SweepSpec, EveryRunGetsTheSameScheduleForItsSeed) {
  const sweep::SweepSpec s = sweep::parse_spec(tiny_spec(), "spec.json", "");
  const train::TrainConfig a = sweep::train_config_for(s, s.variants[0], 7);
  const train::TrainConfig g = sweep::train_config_for(s, s.variants[1], 7);
  EXPECT_EQ(a.steps, 16);  // 2048 tokens / (4 x 32)
  EXPECT_EQ(a.seed, 7u);
  EXPECT_EQ(train::train_config_to_json(a), train::train_config_to_json(g));
}

}  // namespace
}  // namespace gatedlm
