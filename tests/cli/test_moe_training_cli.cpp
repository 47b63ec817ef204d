// Mixture-of-experts models end to end through the binary: training with the global load
// balance over micro-batches (auxiliary losses in metrics.jsonl), a resume that repeats
// an uninterrupted run bit for bit (checkpoint round trip of the Qwen-MoE tensor names),
// `params`, and `analyze` / `report` (expert load; the sink and massive-activation probes
// run on an MoE model).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_runner.h"
#include "io/checkpoint.h"
#include "model/param_layout.h"
#include "train/train_config.h"
#include "train/trainer.h"
#include "tiny_training_data.h"
#include "test_files.h"

namespace gatedlm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::run_gatedlm;
using testing::step_records;

class MoeTraining : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = testing::suite_root("moe");
    auto r = testing::make_tiny_training_root(root_);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    // The tiny training model with 8 experts (top-2, one shared expert) in layer 1 only.
    json c = json::parse(testing::read_file(root_ / "model.json"));
    c["moe"] = {{"n_experts", 8}, {"top_k", 2}, {"expert_hidden", 24}, {"n_shared", 1}, {"every", 2},
                {"lb_coef", 0.01}, {"z_coef", 0.001}};
    std::ofstream(root_ / "moe.json") << c.dump();
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }

  static std::vector<std::string> train_args(const fs::path& run, int steps) {
    return {"train",        "--config",     (root_ / "moe.json").string(), "--data", (root_ / "data").string(),
            "--out",        run.string(),   "--steps", std::to_string(steps), "--batch-size", "2",
            "--grad-accum", "2",            "--seq-len", "32",             "--save-every", "4",
            "--eval-every", "100",          "--eval-tokens", "512",         "--warmup", "2", "--lr", "3e-3"};
  }
  static fs::path root_;
};
fs::path MoeTraining::root_;

TEST_F(MoeTraining, LogsAuxLossesAndResumesBitForBit) {
  const fs::path straight = root_ / "straight", stopped = root_ / "stopped";
  auto r = run_gatedlm(train_args(straight, 8));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<json> steps = step_records(straight);
  ASSERT_EQ(steps.size(), 8u);
  for (const json& s : steps) {
    for (const char* k : {"lb_loss", "z_loss", "lb_coef", "z_coef", "lb_count_s"}) ASSERT_TRUE(s.contains(k)) << k;
    EXPECT_DOUBLE_EQ(s["lb_coef"].get<double>(), 0.01);
    EXPECT_DOUBLE_EQ(s["z_coef"].get<double>(), 0.001);
    // LB = E sum f_i P_i is 1 when balanced and at most E; Z is a mean of squares.
    EXPECT_GT(s["lb_loss"].get<double>(), 0.5);
    EXPECT_LT(s["lb_loss"].get<double>(), 8.0);
    EXPECT_GT(s["z_loss"].get<double>(), 0.0);
  }
  // Stop at step 4 (a checkpoint) with the schedule of 8 steps, resume: the same losses and
  // weights. (In process: the trainer's stop_at_step, which the demo uses.)
  train::TrainRequest req;
  req.out = stopped.string();
  req.model_config = (root_ / "moe.json").string();
  req.data = (root_ / "data").string();
  req.config = train::train_config_from_json(
      json{{"batch_size", 2}, {"grad_accum", 2}, {"seq_len", 32}, {"steps", 8}, {"save_every", 4},
           {"eval_every", 100}, {"eval_tokens", 512}, {"warmup", 2}, {"lr", 3e-3}},
      "test");
  req.stop_at_step = 4;
  ASSERT_EQ(train::run_training(req), train::TrainOutcome::paused);
  ASSERT_EQ(step_records(stopped).size(), 4u);
  r = run_gatedlm({"train", "--resume", stopped.string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<json> resumed = step_records(stopped);
  ASSERT_EQ(resumed.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(resumed[i]["loss"], steps[i]["loss"]) << "step " << i + 1;
    EXPECT_EQ(resumed[i]["lb_loss"], steps[i]["lb_loss"]) << "step " << i + 1;
  }
  EXPECT_TRUE(testing::read_file(straight / "checkpoints" / "step_00000008" / "model.safetensors") ==
              testing::read_file(stopped / "checkpoints" / "step_00000008" / "model.safetensors"))
      << "final weights differ";

  // The checkpoint holds the Qwen-MoE names and loads back into the same layout.
  const std::string header = testing::read_file(straight / "checkpoints" / "step_00000008" / "model.safetensors").substr(0, 20000);
  for (const char* name : {"model.layers.1.mlp.gate.weight", "model.layers.1.mlp.experts.7.down_proj.weight",
                           "model.layers.1.mlp.shared_expert.up_proj.weight",
                           "model.layers.1.mlp.shared_expert_gate.weight", "model.layers.0.mlp.gate_proj.weight"})
    EXPECT_NE(header.find(name), std::string::npos) << name;
  const io::Checkpoint ck = io::load_checkpoint(straight.string());
  EXPECT_TRUE(ck.config.has_moe());
  EXPECT_EQ(ck.params.size(), static_cast<size_t>(model::ParamLayout(ck.config).total()));

  // analyze: expert load per MoE layer, and the sink / massive-activation probes.
  const fs::path analysis = root_ / "analysis.json";
  r = run_gatedlm({"analyze", "--checkpoint", straight.string(), "--data", (root_ / "data").string(), "--sequences",
                   "4", "--seq-len", "32", "--out", analysis.string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json a = json::parse(testing::read_file(analysis));
  ASSERT_TRUE(a["experts"].is_object()) << a["experts"];
  ASSERT_EQ(a["experts"]["per_layer"].size(), 1u);
  const json& layer = a["experts"]["per_layer"][0];
  EXPECT_EQ(layer["layer"], 1);
  double sum = 0, largest = 0;
  for (const json& s : layer["share"]) sum += s.get<double>(), largest = std::max(largest, s.get<double>());
  EXPECT_NEAR(sum, 1.0, 1e-9);
  EXPECT_NEAR(layer["max_over_mean"].get<double>(), largest * 8, 1e-9);
  EXPECT_EQ(layer["assignments"].get<double>(), 4 * 32 * 2);
  EXPECT_GT(layer["entropy_ratio"].get<double>(), 0.0);
  EXPECT_LE(layer["entropy_ratio"].get<double>(), 1.0 + 1e-12);
  EXPECT_TRUE(a["f_attn"]["mean"].is_number());
  EXPECT_TRUE(a["massive_activations"]["m_act"].is_number());
  EXPECT_EQ(a["massive_activations"]["per_layer"].size(), 2u);

  r = run_gatedlm({"report", straight.string(), analysis.string(), "--out", (root_ / "report").string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(testing::read_file(root_ / "report" / "index.html").find("Expert load"), std::string::npos);
}

TEST_F(MoeTraining, ParamsReportsActivePerTokenAndGates) {
  auto r = run_gatedlm({"params", "--config", (root_ / "moe.json").string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json j = json::parse(r.output.substr(r.output.find('{')));
  const int64_t d = 48, expert = 3 * d * 24;
  EXPECT_EQ(j["experts"], 8 * expert);
  EXPECT_EQ(j["active_per_token"].get<int64_t>(), j["total"].get<int64_t>() - 6 * expert);
  EXPECT_EQ(j["moe_gate"], 8 * d + d);  // router + shared-expert gate of the one MoE layer
  r = run_gatedlm({"params", "--config", (root_ / "moe.json").string()});
  EXPECT_NE(r.output.find("active/token"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace gatedlm
