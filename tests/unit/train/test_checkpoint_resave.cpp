// save_training_checkpoint when the step it saves already has a checkpoint that `latest`
// names (a resumed run saving that step again): `latest` must name a complete checkpoint
// at every instant, and afterwards the new one.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/error.h"
#include "core/rng.h"
#include "model/init.h"
#include "train/run_dir.h"

namespace gatedlm::train {
namespace {

namespace fs = std::filesystem;

class CheckpointResave : public ::testing::Test {
 protected:
  void SetUp() override {
    run_ = fs::temp_directory_path() / ("gatedlm_resave_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(run_);
    fs::create_directories(run_);
    config_ = model::config_from_json({{"vocab_size", 40}, {"d_model", 8},  {"n_layers", 1}, {"n_heads", 2},
                                       {"n_kv_heads", 1},  {"head_dim", 4}, {"ffn_hidden", 16}, {"max_seq_len", 16}});
    model::init_params(params_, model::ParamLayout(config_), config_, 3);
  }
  void TearDown() override { fs::remove_all(run_); }

  // Saves step `step` with every weight and moment offset by `version` and planned_steps =
  // 100 + version, so that a load tells which save it came from.
  void save(int64_t step, int version) const {
    std::vector<float> p = params_, m(params_.size(), 0.5f * version), v(params_.size(), 0.25f * version);
    for (float& x : p) x += static_cast<float>(version);
    TrainingState state;
    state.step = step;
    state.tokens_seen = step * 10;
    state.planned_steps = 100 + version;
    save_training_checkpoint(run_.string(), config_, p, m, v, state, 2);
  }
  // The version the run's latest checkpoint holds (checked to agree in every file).
  int loaded_version() const {
    const TrainingCheckpoint ck = load_training_checkpoint(run_.string());
    const int version = static_cast<int>(ck.state.planned_steps - 100);
    EXPECT_EQ(ck.params[0], params_[0] + static_cast<float>(version));
    EXPECT_EQ(ck.adam_m[0], 0.5f * version);
    EXPECT_EQ(ck.adam_v.back(), 0.25f * version);
    return version;
  }
  std::string latest() const {
    std::ifstream in(run_ / "latest");
    std::string s;
    std::getline(in, s);
    return s;
  }
  std::vector<std::string> checkpoint_dirs() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(run_ / "checkpoints")) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  fs::path run_;
  model::ModelConfig config_;
  std::vector<float> params_;
};

TEST_F(CheckpointResave, TheSameStepSavedAgainReplacesItWithoutTouchingWhatLatestNames) {
  save(2, 1);
  save(3, 2);
  EXPECT_EQ(latest(), "step_00000003");
  save(3, 3);  // `latest` names step_00000003: the new copy goes beside it, then latest moves
  EXPECT_EQ(latest(), "step_00000003.resaved");
  EXPECT_EQ(loaded_version(), 3);
  EXPECT_EQ(checkpoint_dirs(), (std::vector<std::string>{"step_00000002", "step_00000003.resaved"}));
  save(3, 4);  // and back
  EXPECT_EQ(latest(), "step_00000003");
  EXPECT_EQ(loaded_version(), 4);
  EXPECT_EQ(checkpoint_dirs(), (std::vector<std::string>{"step_00000002", "step_00000003"}));
  save(4, 5);
  EXPECT_EQ(latest(), "step_00000004");
  EXPECT_EQ(loaded_version(), 5);
  EXPECT_EQ(checkpoint_dirs(), (std::vector<std::string>{"step_00000003", "step_00000004"}));  // keep 2
}

// A stale directory of the step that `latest` does not name (a crash after renaming it in,
// before `latest` moved) is replaced as before.
TEST_F(CheckpointResave, AStaleCopyThatLatestDoesNotNameIsReplaced) {
  save(5, 1);
  save(6, 2);
  std::ofstream(run_ / "latest") << "step_00000005\n";  // as if the crash came before `latest` moved
  EXPECT_EQ(loaded_version(), 1);
  save(6, 3);
  EXPECT_EQ(latest(), "step_00000006");
  EXPECT_EQ(loaded_version(), 3);
}

// SIGKILL at random instants of a process that saves the same step over and over: `latest`
// always names a complete, loadable checkpoint of one of the versions saved.
TEST_F(CheckpointResave, KilledAtAnyInstantLatestStaysLoadable) {
  save(7, 0);
  Rng rng(2024);
  for (int round = 0; round < 30; ++round) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {  // the child saves until it is killed; it never returns into gtest
      try {
        for (int version = 1;; ++version) save(7, version % 50);
      } catch (...) {
      }
      ::_exit(3);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(2000 + rng.below(30000)));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    SCOPED_TRACE("round " + std::to_string(round) + ", latest " + latest());
    try {
      const int version = loaded_version();
      EXPECT_GE(version, 0);
      EXPECT_LT(version, 50);
    } catch (const Error& e) {
      ADD_FAILURE() << "latest does not name a loadable checkpoint: " << e.what();
    }
  }
}

}  // namespace
}  // namespace gatedlm::train
