// A training run's numbers do not depend on its thread count: the same run at 1 and at 2
// threads (a gated model, a mixture-of-experts one and a hybrid one) ends with the same weights, bit
// for bit; and a run killed with SIGKILL and resumed on another thread count (what the
// thread governor does after a kill -9: the dead run's load makes the resumed one start on
// fewer threads) ends exactly where the unbroken run does.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cli_runner.h"
#include "test_files.h"
#include "tiny_training_data.h"

namespace gatedlm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::read_file;
using testing::run_gatedlm;
using testing::ScopedEnv;

// Every step's loss (as written) of a run's metrics.jsonl, in order.
std::vector<std::string> losses_of(const fs::path& run) {
  std::vector<std::string> out;
  std::ifstream in(run / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const json record = json::parse(line);
    if (record.contains("loss")) out.push_back(record["step"].dump() + ":" + record["loss"].dump());
  }
  return out;
}

class ThreadCountDeterminism : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = fs::temp_directory_path() / ("gatedlm_threads_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
    const auto r = testing::make_tiny_training_data(root_);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    // Wide enough that the products are cut into several tiles and that attention's backward
    // splits its one kv head's key blocks; the tokens of a step (8 x 128) are many rows for
    // the norms' and biases' weight gradients.
    json gated = json::parse(read_file(root_ / "model.json"));
    gated.update({{"d_model", 128}, {"n_heads", 4}, {"n_kv_heads", 1}, {"head_dim", 32}, {"ffn_hidden", 256},
                  {"max_seq_len", 128}, {"attn_qkv_bias", true}});
    std::ofstream(root_ / "gated.json") << gated.dump();
    json moe = gated;
    moe["moe"] = {{"n_experts", 4}, {"top_k", 2}, {"expert_hidden", 64}, {"n_shared", 1}, {"every", 1},
                  {"lb_coef", 0.01}, {"z_coef", 0.001}};
    std::ofstream(root_ / "moe.json") << moe.dump();
    // Gated DeltaNet layers beside a softmax one: its chunked delta rule runs the batch's
    // sequences on threads of their own at 2 threads, its heads' products at 1.
    json hybrid = gated;
    hybrid.update({{"full_attention_interval", 2},
                   {"linear_attention",
                    {{"n_k_heads", 2}, {"n_v_heads", 4}, {"k_head_dim", 32}, {"v_head_dim", 32}, {"conv_kernel", 4}}}});
    std::ofstream(root_ / "hybrid.json") << hybrid.dump();
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }

  static std::vector<std::string> train_args(const std::string& config, const fs::path& run, int steps) {
    return {"train",         "--config",   (root_ / config).string(), "--data", (root_ / "data").string(),
            "--out",         run.string(), "--steps", std::to_string(steps), "--batch-size", "8",
            "--seq-len",     "128",        "--save-every", "4",               "--eval-every", "1000",
            "--eval-tokens", "1024",       "--warmup", "2",                   "--lr", "3e-3"};
  }

  // Trains `config` for `steps` steps on `threads` threads into root_/name.
  static fs::path train(const std::string& config, const std::string& name, int steps, const char* threads) {
    const ScopedEnv fixed("OMP_NUM_THREADS", threads);
    const fs::path run = root_ / name;
    const auto r = run_gatedlm(train_args(config, run, steps));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return run;
  }

  static std::string checkpoint_file(const fs::path& run, int step, const char* file) {
    char dir[32];
    std::snprintf(dir, sizeof dir, "step_%08d", step);
    return read_file(run / "checkpoints" / dir / file);
  }

  static void expect_same_run(const fs::path& a, const fs::path& b, int steps) {
    EXPECT_EQ(losses_of(a), losses_of(b));
    EXPECT_EQ(losses_of(a).size(), static_cast<size_t>(steps));
    const std::string weights = checkpoint_file(a, steps, "model.safetensors");
    ASSERT_FALSE(weights.empty());
    EXPECT_TRUE(weights == checkpoint_file(b, steps, "model.safetensors"))
        << "final weights differ between " << a.filename() << " and " << b.filename();
    EXPECT_TRUE(checkpoint_file(a, steps, "optimizer.safetensors") == checkpoint_file(b, steps, "optimizer.safetensors"))
        << "optimizer state differs between " << a.filename() << " and " << b.filename();
  }

  static fs::path root_;
};
fs::path ThreadCountDeterminism::root_;

TEST_F(ThreadCountDeterminism, GatedModelTrainsTheSameBitsOnOneAndTwoThreads) {
  const int steps = 8;
  expect_same_run(train("gated.json", "gated_1", steps, "1"), train("gated.json", "gated_2", steps, "2"), steps);
}

TEST_F(ThreadCountDeterminism, MixtureOfExpertsTrainsTheSameBitsOnOneAndTwoThreads) {
  const int steps = 8;
  expect_same_run(train("moe.json", "moe_1", steps, "1"), train("moe.json", "moe_2", steps, "2"), steps);
}

TEST_F(ThreadCountDeterminism, HybridModelTrainsTheSameBitsOnOneAndTwoThreads) {
  const int steps = 8;
  expect_same_run(train("hybrid.json", "hybrid_1", steps, "1"), train("hybrid.json", "hybrid_2", steps, "2"), steps);
}

TEST_F(ThreadCountDeterminism, ResumeOnAnotherThreadCountAfterSigkillIsBitIdentical) {
  const int steps = 24;
  const fs::path straight = train("gated.json", "straight", steps, "2");
  const fs::path killed = root_ / "killed";
  {
    const ScopedEnv two("OMP_NUM_THREADS", "2");
    const pid_t pid = testing::spawn_gatedlm(train_args("gated.json", killed, steps), (root_ / "killed.log").string());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (!fs::exists(killed / "latest") && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ::kill(pid, SIGKILL);
    ASSERT_EQ(testing::wait_exit_code(pid), 128 + SIGKILL) << read_file(root_ / "killed.log");
  }
  ASSERT_FALSE(fs::exists(killed / "summary.json")) << "the run finished before it was killed: the test would prove nothing";
  {
    const ScopedEnv one("OMP_NUM_THREADS", "1");
    const auto r = run_gatedlm({"train", "--resume", killed.string()});
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  expect_same_run(straight, killed, steps);
}

}  // namespace
}  // namespace gatedlm
