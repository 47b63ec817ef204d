// Training runs through the real binary: a run stopped by SIGKILL or Ctrl-C and resumed
// gives the same losses and the same final weights, bit for bit, as one never stopped;
// bad input stops with a message naming the problem.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "cli_runner.h"
#include "tiny_training_data.h"
#include "test_files.h"

namespace gatedlm {
namespace {

namespace fs = std::filesystem;
using testing::run_gatedlm;

// The per-step records of metrics.jsonl, as text, in order.
std::vector<std::string> step_losses(const fs::path& run) {
  std::vector<std::string> out;
  std::ifstream in(run / "metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) out.push_back(std::to_string(j["step"].get<int64_t>()) + ":" + j["loss"].dump());
  }
  return out;
}

class TrainRunTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = fs::temp_directory_path() / ("gatedlm_train_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
    auto r = testing::make_tiny_training_data(root_);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }

  static std::vector<std::string> train_args(const fs::path& run, int steps) {
    return {"train",         "--config",     (root_ / "model.json").string(), "--data", (root_ / "data").string(),
            "--out",         run.string(),   "--steps", std::to_string(steps), "--batch-size", "4",
            "--seq-len",     "48",           "--save-every", "10",            "--eval-every", "25",
            "--eval-tokens", "2048",         "--warmup", "5",                  "--lr", "3e-3"};
  }

  // Starts a run, stops it with `signal` once its first checkpoint exists, resumes it,
  // and checks it against an uninterrupted run.
  void check_stop_and_resume(int signal, int expected_exit) {
    const int steps = 120;
    const fs::path straight = root_ / ("straight_" + std::to_string(signal));
    const fs::path stopped = root_ / ("stopped_" + std::to_string(signal));
    auto r = run_gatedlm(train_args(straight, steps));
    ASSERT_EQ(r.exit_code, 0) << r.output;

    const pid_t pid = testing::spawn_gatedlm(train_args(stopped, steps), (root_ / "log.txt").string());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!fs::exists(stopped / "latest") && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ::kill(pid, signal);
    const int code = testing::wait_exit_code(pid);
    ASSERT_EQ(code, expected_exit) << testing::read_file(root_ / "log.txt");
    ASSERT_FALSE(fs::exists(stopped / "summary.json") &&
                 nlohmann::json::parse(testing::read_file(stopped / "summary.json"))["outcome"] == "completed")
        << "the run finished before it could be stopped: the test would prove nothing";

    r = run_gatedlm({"train", "--resume", stopped.string()});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(step_losses(stopped), step_losses(straight));
    EXPECT_EQ(step_losses(stopped).size(), static_cast<size_t>(steps));
    const std::string a = testing::read_file(straight / "checkpoints" / "step_00000120" / "model.safetensors");
    const std::string b = testing::read_file(stopped / "checkpoints" / "step_00000120" / "model.safetensors");
    ASSERT_FALSE(a.empty());
    EXPECT_TRUE(a == b) << "final weights differ";
    EXPECT_EQ(testing::read_file(straight / "checkpoints" / "step_00000120" / "optimizer.safetensors"),
              testing::read_file(stopped / "checkpoints" / "step_00000120" / "optimizer.safetensors"));
  }

  static fs::path root_;
};
fs::path TrainRunTest::root_;

TEST_F(TrainRunTest, ResumeAfterSigkillIsBitIdentical) { check_stop_and_resume(SIGKILL, 128 + SIGKILL); }

TEST_F(TrainRunTest, CtrlCSavesAndResumeIsBitIdentical) { check_stop_and_resume(SIGINT, 130); }

TEST_F(TrainRunTest, WritesDocumentedMetricsAndSummary) {
  const fs::path run = root_ / "metrics";
  auto r = run_gatedlm(train_args(run, 30));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(run / "metrics.jsonl");
  std::string line;
  int steps = 0, evals = 0;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) {
      ++steps;
      for (const char* k : {"step", "lr", "loss", "grad_norm", "tokens_per_s", "elapsed_s"})
        EXPECT_TRUE(j.contains(k)) << k;
    } else {
      ++evals;
      for (const char* k : {"step", "val_loss", "val_ppl", "val_bpb"}) EXPECT_TRUE(j.contains(k)) << k;
      EXPECT_NEAR(j["val_ppl"].get<double>(), std::exp(j["val_loss"].get<double>()), 1e-9);
      // Byte tokenizer: one byte per token apart from BOS/EOS, so bpb ~ loss / ln 2.
      EXPECT_NEAR(j["val_bpb"].get<double>(), j["val_loss"].get<double>() / std::log(2.0), 0.01);
    }
  }
  EXPECT_EQ(steps, 30);
  EXPECT_EQ(evals, 2);  // step 25 and the end
  auto summary = nlohmann::json::parse(testing::read_file(run / "summary.json"));
  EXPECT_EQ(summary["outcome"], "completed");
  EXPECT_EQ(summary["steps"], 30);
  EXPECT_TRUE(summary["spikes"].contains("count"));
  EXPECT_LT(summary["val_loss"].get<double>(), std::log(258.0));  // it learned something

  auto e = run_gatedlm({"eval", "--checkpoint", run.string(), "--data", (root_ / "data").string(), "--json",
                        "--seq-len", "48", "--max-tokens", "2048"});
  ASSERT_EQ(e.exit_code, 0) << e.output;
  auto ej = nlohmann::json::parse(e.output.substr(e.output.find('{')));
  for (const char* k : {"loss", "ppl", "bpb", "tokens"}) EXPECT_TRUE(ej.contains(k)) << k;
  // Same windows as the final evaluation of the run.
  EXPECT_NEAR(ej["loss"].get<double>(), summary["val_loss"].get<double>(), 1e-6);
}

TEST_F(TrainRunTest, BadInputIsRefusedWithAClearMessage) {
  const fs::path run = root_ / "bad";
  auto r = run_gatedlm(train_args(run, 10));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto expect_error = [](const std::vector<std::string>& args, const std::string& needle) {
    auto res = run_gatedlm(args);
    EXPECT_NE(res.exit_code, 0) << res.output;
    EXPECT_NE(res.output.find(needle), std::string::npos) << res.output;
  };
  // An existing run is not overwritten.
  expect_error(train_args(run, 10), "already exists");
  // Resume may not change the model or the optimiser settings.
  nlohmann::json other{{"vocab_size", 258}, {"d_model", 32}, {"n_layers", 1}, {"n_heads", 2},
                       {"n_kv_heads", 2},   {"head_dim", 16}, {"ffn_hidden", 64}, {"max_seq_len", 64}};
  std::ofstream(root_ / "other.json") << other.dump();
  expect_error({"train", "--resume", run.string(), "--config", (root_ / "other.json").string()}, "differs");
  expect_error({"train", "--resume", run.string(), "--lr", "0.5"}, "cannot change");
  // A model whose vocabulary is smaller than the data's tokenizer.
  other["vocab_size"] = 100;
  std::ofstream(root_ / "small_vocab.json") << other.dump();
  expect_error({"train", "--config", (root_ / "small_vocab.json").string(), "--data", (root_ / "data").string(),
                "--out", (root_ / "small").string(), "--steps", "2"},
               "vocab_size");
  // A damaged shard.
  fs::copy(root_ / "data", root_ / "broken", fs::copy_options::recursive);
  fs::resize_file(root_ / "broken" / "train.bin", fs::file_size(root_ / "broken" / "train.bin") / 2);
  expect_error({"train", "--config", (root_ / "model.json").string(), "--data", (root_ / "broken").string(), "--out",
                (root_ / "b2").string(), "--steps", "2"},
               "train.bin");
  // An output directory that cannot be written.
  expect_error({"train", "--config", (root_ / "model.json").string(), "--data", (root_ / "data").string(), "--out",
                "/proc/gatedlm_run", "--steps", "2"},
               "/proc/gatedlm_run");
  // The run that was refused did not touch the existing one.
  EXPECT_EQ(step_losses(run).size(), 10u);
}

}  // namespace
}  // namespace gatedlm
