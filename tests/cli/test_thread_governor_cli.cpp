// The OpenMP thread count under shared cores (core/thread_governor.h): the decision fed
// with samples, the /proc parsing, and gatedlm train itself beside busy threads.
#include "core/thread_governor.h"

#include <gtest/gtest.h>

#include <atomic>
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

// The threads each step ran with (metrics.jsonl's "threads").
std::vector<int> step_threads(const fs::path& run) {
  std::vector<int> out;
  std::ifstream in(run / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains("loss")) out.push_back(j.at("threads").get<int>());
  }
  return out;
}

class ThreadGovernorCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one core: nothing to share";
    dir_ = fs::temp_directory_path() / ("gatedlm_governor_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    const auto r = testing::make_tiny_training_data(dir_);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  std::vector<std::string> train_args(const fs::path& run, int steps) const {
    return {"train",   "--config", (dir_ / "model.json").string(), "--data", (dir_ / "data").string(), "--out",
            run.string(), "--steps", std::to_string(steps), "--batch-size", "4", "--seq-len", "32",
            "--eval-every", "0", "--save-every", "0"};
  }
  fs::path dir_;
};

// Busy threads on every core (twice over): the default drops to one thread, where no
// barrier waits for a descheduled thread.
TEST_F(ThreadGovernorCliTest, TrainingBesideBusyThreadsRunsOnFewerThreads) {
  testing::ScopedEnv adaptive("OMP_NUM_THREADS", nullptr);
  std::atomic<bool> stop{false};
  std::vector<std::thread> burners;
  for (unsigned i = 0; i < 2 * std::thread::hardware_concurrency(); ++i)
    burners.emplace_back([&stop] {
      volatile uint64_t x = 0;
      while (!stop.load(std::memory_order_relaxed)) x = x * 6364136223846793005ULL + 1;
    });
  const fs::path run = dir_ / "busy";
  const auto r = testing::run_gatedlm(train_args(run, 400));  // long enough for the 100 ms samples on any machine
  stop = true;
  for (auto& t : burners) t.join();
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<int> threads = step_threads(run);
  ASSERT_EQ(threads.size(), 400u);
  EXPECT_EQ(threads.back(), 1) << r.output;
  for (int t : threads) EXPECT_LE(t, static_cast<int>(std::thread::hardware_concurrency()));
}

// OMP_NUM_THREADS fixes the count: every step runs with it, and --version says so.
TEST_F(ThreadGovernorCliTest, OmpNumThreadsFixesTheCount) {
  testing::ScopedEnv fixed("OMP_NUM_THREADS", "2");
  const fs::path run = dir_ / "fixed";
  const auto r = testing::run_gatedlm(train_args(run, 20));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (int t : step_threads(run)) EXPECT_EQ(t, 2);
  EXPECT_TRUE(testing::contains(testing::run_gatedlm({"--version"}).output, "openmp threads: fixed at 2 (OMP_NUM_THREADS)"));
}

TEST_F(ThreadGovernorCliTest, VersionSaysWhetherTheCountAdapts) {
  testing::ScopedEnv unset("OMP_NUM_THREADS", nullptr);
  EXPECT_TRUE(testing::contains(testing::run_gatedlm({"--version"}).output, "openmp threads: adaptive, up to "));
  testing::ScopedEnv fixed("GATEDLM_THREADS", "fixed");
  EXPECT_TRUE(testing::contains(testing::run_gatedlm({"--version"}).output, "(GATEDLM_THREADS=fixed)"));
}

}  // namespace
}  // namespace gatedlm
