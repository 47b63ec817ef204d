// Hybrid models (Gated DeltaNet layers beside a gated softmax layer, Qwen3.5-style) end to
// end through the binary: training, a resume that repeats an uninterrupted run bit for bit,
// `analyze` (the sink probes on the softmax layer only, the linear layers' gate, beta and
// decay), `report`, greedy `generate` against the full forward's choice, `stream-eval`,
// `bench generate`, and a qwen35 GGUF's tiled value heads through import, fine-tuning and
// export to Hugging Face.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "test_files.h"
#include "tiny_training_data.h"
#include "train/train_config.h"
#include "train/trainer.h"

namespace gatedlm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::run_gatedlm;
using testing::step_records;

class HybridModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = testing::suite_root("hybrid");
    auto r = testing::make_tiny_training_root(root_);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    // Three Gated DeltaNet layers, then one gated softmax layer with partial rotary and
    // zero-centred norms, as Qwen3.5 stacks them.
    json c = json::parse(testing::read_file(root_ / "model.json"));
    c["n_layers"] = 4;
    c["full_attention_interval"] = 4;
    c["linear_attention"] = {{"n_k_heads", 2}, {"n_v_heads", 4}, {"k_head_dim", 8}, {"v_head_dim", 8}};
    c["norm_zero_centered"] = true;
    c["rope_dims"] = 4;
    std::ofstream(root_ / "hybrid.json") << c.dump();
    r = run_gatedlm(train_args(root_ / "straight", 8));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }

  static std::vector<std::string> train_args(const fs::path& run, int steps) {
    return {"train",        "--config",     (root_ / "hybrid.json").string(), "--data", (root_ / "data").string(),
            "--out",        run.string(),   "--steps", std::to_string(steps), "--batch-size", "2",
            "--grad-accum", "2",            "--seq-len", "40",              "--save-every", "4",
            "--eval-every", "100",          "--eval-tokens", "512",          "--warmup", "2", "--lr", "3e-3"};
  }
  static fs::path checkpoint() { return root_ / "straight"; }
  static fs::path root_;
};
fs::path HybridModel::root_;

TEST_F(HybridModel, TrainsAndResumesBitForBit) {
  const std::vector<json> steps = step_records(root_ / "straight");
  ASSERT_EQ(steps.size(), 8u);
  EXPECT_LT(steps.back()["loss"].get<double>(), steps.front()["loss"].get<double>());
  const fs::path stopped = root_ / "stopped";
  train::TrainRequest req;
  req.out = stopped.string();
  req.model_config = (root_ / "hybrid.json").string();
  req.data = (root_ / "data").string();
  req.config = train::train_config_from_json(
      json{{"batch_size", 2}, {"grad_accum", 2}, {"seq_len", 40}, {"steps", 8}, {"save_every", 4},
           {"eval_every", 100}, {"eval_tokens", 512}, {"warmup", 2}, {"lr", 3e-3}},
      "test");
  req.stop_at_step = 4;
  ASSERT_EQ(train::run_training(req), train::TrainOutcome::paused);
  auto r = run_gatedlm({"train", "--resume", stopped.string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<json> resumed = step_records(stopped);
  ASSERT_EQ(resumed.size(), 8u);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(resumed[i]["loss"], steps[i]["loss"]) << "step " << i + 1;
  EXPECT_TRUE(testing::read_file(root_ / "straight" / "checkpoints" / "step_00000008" / "model.safetensors") ==
              testing::read_file(stopped / "checkpoints" / "step_00000008" / "model.safetensors"))
      << "final weights differ";
  const std::string header =
      testing::read_file(root_ / "straight" / "checkpoints" / "step_00000008" / "model.safetensors").substr(0, 20000);
  for (const char* name : {"model.layers.0.linear_attn.in_proj_qkv.weight", "model.layers.2.linear_attn.A_log",
                           "model.layers.1.linear_attn.conv1d.weight", "model.layers.3.self_attn.gate.weight"})
    EXPECT_NE(header.find(name), std::string::npos) << name;
}

TEST_F(HybridModel, AnalyzeProbesSoftmaxAndLinearLayers) {
  const fs::path analysis = root_ / "analysis.json";
  auto r = run_gatedlm({"analyze", "--checkpoint", checkpoint().string(), "--data", (root_ / "data").string(),
                        "--sequences", "3", "--seq-len", "40", "--out", analysis.string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json a = json::parse(testing::read_file(analysis));
  const json& f = a["f_attn"]["per_layer"];
  ASSERT_EQ(f.size(), 4u);
  for (int l = 0; l < 3; ++l) EXPECT_TRUE(f[l].is_null()) << "linear layer " << l << ": " << f[l];
  EXPECT_TRUE(f[3].is_number());
  EXPECT_EQ(a["f_attn"]["mean"], f[3]);  // the mean over the one softmax layer
  EXPECT_TRUE(a["gates"]["mean_score"].is_number());
  EXPECT_EQ(a["massive_activations"]["per_layer"].size(), 4u);
  const json& lin = a["linear_attention"]["per_layer"];
  ASSERT_EQ(lin.size(), 3u);
  for (const json& l : lin) {
    ASSERT_EQ(l["beta_per_head"].size(), 4u);
    for (const json& b : l["beta_per_head"]) EXPECT_TRUE(b.get<double>() > 0 && b.get<double>() < 1);
    for (const json& d : l["decay_per_head"]) EXPECT_TRUE(d.get<double>() > 0 && d.get<double>() < 1);
    EXPECT_TRUE(l["z_gate"]["mean"].is_number());
  }
  r = run_gatedlm({"report", checkpoint().string(), analysis.string(), "--out", (root_ / "report").string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

TEST_F(HybridModel, GeneratesStreamsAndBenchmarks) {
  auto r = run_gatedlm({"generate", "--checkpoint", checkpoint().string(), "--prompt", "the king shall",
                        "--max-tokens", "24", "--temperature", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("24 generated"), std::string::npos) << r.output;
  // The streaming window applies to the softmax layer; the linear layers carry their state.
  r = run_gatedlm({"stream-eval", "--checkpoint", checkpoint().string(), "--text", (root_ / "corpus.txt").string(),
                   "--window", "16", "--sinks", "0,2", "--tokens", "200", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_gatedlm({"bench", "generate", "--checkpoint", checkpoint().string(), "--batch", "2", "--prompt-tokens",
                   "20", "--new-tokens", "8"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// A qwen35 GGUF of a model with more value heads than key heads imports in llama.cpp's tiled
// value-head order (linear_attention.value_head_order), scores as the model it came from,
// fine-tunes in that order, and goes to Hugging Face grouped: the import of that scores as the
// fine-tuned model.
TEST_F(HybridModel, AQwen35FileKeepsItsTiledHeadsThroughFineTuningAndExport) {
  const fs::path dir = root_ / "tiled";
  fs::create_directories(dir);
  std::ofstream(dir / "ids.txt") << "104 101 32 107 105 110 103 32 115 104 97 108 108 32 115 112 101 97 107 32 111 102";
  const auto mean_loss = [&](const fs::path& model) {
    const auto r = run_gatedlm({"score", "--checkpoint", model.string(), "--token-ids", (dir / "ids.txt").string(),
                                "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return json::parse(r.output.substr(r.output.rfind("{\"")))["mean_loss"].get<double>();
  };
  const auto order = [](const fs::path& config) {
    return json::parse(testing::read_file(config))["linear_attention"].value("value_head_order", "grouped");
  };
  auto r = run_gatedlm({"export", checkpoint().string(), "--format", "gguf", "--out", (dir / "gguf").string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_gatedlm({"import", (dir / "gguf" / "model.gguf").string(), "--out", (dir / "imported").string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(order(dir / "imported" / "config.json"), "tiled");
  EXPECT_NEAR(mean_loss(dir / "imported"), mean_loss(checkpoint()), 1e-5);

  r = run_gatedlm({"train", "--init-from", (dir / "imported").string(), "--data", (root_ / "data").string(), "--out",
                   (dir / "tuned").string(), "--steps", "2", "--batch-size", "2", "--seq-len", "40", "--eval-every",
                   "100", "--eval-tokens", "512", "--warmup", "1", "--lr", "3e-3"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(order(dir / "tuned" / "config.json"), "tiled");
  const double tuned = mean_loss(dir / "tuned");
  EXPECT_GT(std::fabs(tuned - mean_loss(dir / "imported")), 1e-6) << "two steps changed nothing";

  r = run_gatedlm({"export", (dir / "tuned").string(), "--format", "qwen3_5", "--out", (dir / "hf").string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(json::parse(testing::read_file(dir / "hf" / "config.json")).dump().find("value_head_order") !=
               std::string::npos);
  r = run_gatedlm({"import", (dir / "hf").string(), "--out", (dir / "from_hf").string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(order(dir / "from_hf" / "config.json"), "grouped");
  EXPECT_NEAR(mean_loss(dir / "from_hf"), tuned, 1e-5);
}

}  // namespace
}  // namespace gatedlm
