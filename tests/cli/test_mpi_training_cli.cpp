// Data-parallel training under `mpirun -np 2` (skipped when the build has no MPI):
//   - 2 ranks x --grad-accum 2 give the losses, evaluations and weights of one process
//     with --grad-accum 4 (within 1e-6 relative), and two such runs are bit-identical;
//   - a rank killed with SIGKILL stops the job within seconds, the launcher names it, and
//     the last checkpoint resumes in one process to the same result as a run never
//     stopped;
//   - Ctrl-C to mpirun saves one checkpoint (rank 0) and the run resumes on 2 ranks;
//   - a rank that stops answering (SIGSTOP) ends the job at GATEDLM_DIST_TIMEOUT_S;
//   - errors every rank meets are reported once;
//   - the allreduce sums exactly on 3 ranks with uneven shards.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "cli_runner.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "tiny_training_data.h"
#include "test_files.h"

namespace gatedlm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

const std::string kMpiexec = GATEDLM_MPIEXEC;  // empty when the build has no MPI

// metrics.jsonl's records, split into training steps and evaluations.
struct Metrics {
  std::vector<json> steps, evals;
};
Metrics read_metrics(const fs::path& run) {
  Metrics m;
  std::ifstream in(run / "metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    json j = json::parse(line);
    (j.contains("loss") ? m.steps : m.evals).push_back(j);
  }
  return m;
}

bool close(double a, double b, double rel) { return std::abs(a - b) <= rel * std::max(std::abs(a), std::abs(b)); }

// /proc/PID/stat's parent pid.
pid_t parent_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close_paren = s.rfind(')');
  if (close_paren == std::string::npos) return -1;
  std::istringstream rest(s.substr(close_paren + 2));
  char state;
  pid_t ppid = -1;
  rest >> state >> ppid;
  return ppid;
}

// The process below `launcher` that runs MPI rank `rank` (-1 when none is there yet).
pid_t find_rank(pid_t launcher, int rank) {
  std::set<pid_t> family{launcher};
  for (int pass = 0; pass < 3; ++pass)  // children, grandchildren, ...
    for (const auto& e : fs::directory_iterator("/proc")) {
      const std::string name = e.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      const pid_t pid = std::stoi(name);
      if (family.count(parent_of(pid))) family.insert(pid);
    }
  const std::string want = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank);
  for (pid_t pid : family) {
    if (pid == launcher) continue;
    const std::string env = testing::read_file("/proc/" + std::to_string(pid) + "/environ");
    for (size_t at = 0; at < env.size();) {
      const size_t end = env.find('\0', at);
      if (env.compare(at, (end == std::string::npos ? env.size() : end) - at, want) == 0) return pid;
      if (end == std::string::npos) break;
      at = end + 1;
    }
  }
  return -1;
}

class MpiTraining : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (kMpiexec.empty()) return;
    // One thread per process on both sides, so the kernels' arithmetic is the same.
    ::setenv("OMP_NUM_THREADS", "1", 1);
    root_ = fs::temp_directory_path() / ("gatedlm_mpi_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
    auto r = testing::make_tiny_training_data(root_);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() {
    if (!root_.empty()) fs::remove_all(root_);
  }
  void SetUp() override {
    if (kMpiexec.empty()) GTEST_SKIP() << "this build has no MPI (CMake found none): data-parallel training is off";
  }

  static std::vector<std::string> train_args(const fs::path& run, int steps, int grad_accum) {
    return {"train",         "--config",     (root_ / "model.json").string(), "--data", (root_ / "data").string(),
            "--out",         run.string(),   "--steps", std::to_string(steps), "--batch-size", "2",
            "--seq-len",     "32",           "--grad-accum", std::to_string(grad_accum), "--save-every", "10",
            "--eval-every",  "20",           "--eval-tokens", "1024",          "--warmup", "5", "--lr", "3e-3"};
  }
  static std::vector<std::string> mpirun_args(int ranks, const std::vector<std::string>& gatedlm_args) {
    // Containers (CI) often forbid the cross-process memory copy of Open MPI's shared-memory
    // transport: copy through the shared segment instead.
    std::vector<std::string> a{"-np",        std::to_string(ranks), "--allow-run-as-root", "--oversubscribe",
                               "--bind-to",  "none",                "--mca", "btl_vader_single_copy_mechanism",
                               "none",       "-x",                  "OMP_NUM_THREADS", GATEDLM_BINARY};
    a.insert(a.end(), gatedlm_args.begin(), gatedlm_args.end());
    return a;
  }
  static testing::CliResult mpirun(int ranks, const std::vector<std::string>& gatedlm_args) {
    return testing::run_program(kMpiexec, mpirun_args(ranks, gatedlm_args));
  }

  // Same step losses, evaluations and final weights within `rel` (relative).
  static void expect_same_run(const fs::path& a, const fs::path& b, double rel) {
    const Metrics ma = read_metrics(a), mb = read_metrics(b);
    ASSERT_EQ(ma.steps.size(), mb.steps.size());
    ASSERT_EQ(ma.evals.size(), mb.evals.size());
    for (size_t i = 0; i < ma.steps.size(); ++i) {
      EXPECT_EQ(ma.steps[i]["step"], mb.steps[i]["step"]);
      for (const char* k : {"loss", "grad_norm", "lr"})
        EXPECT_TRUE(close(ma.steps[i][k].get<double>(), mb.steps[i][k].get<double>(), rel))
            << k << " at step " << ma.steps[i]["step"] << ": " << ma.steps[i][k] << " vs " << mb.steps[i][k];
    }
    for (size_t i = 0; i < ma.evals.size(); ++i)
      EXPECT_TRUE(close(ma.evals[i]["val_loss"].get<double>(), mb.evals[i]["val_loss"].get<double>(), rel))
          << "evaluation " << i << ": " << ma.evals[i] << " vs " << mb.evals[i];
    const auto wa = io::load_checkpoint(io::resolve_checkpoint_dir(a.string())).params;
    const auto wb = io::load_checkpoint(io::resolve_checkpoint_dir(b.string())).params;
    ASSERT_EQ(wa.size(), wb.size());
    double diff = 0, norm = 0;
    size_t bitwise_different = 0;
    for (size_t i = 0; i < wa.size(); ++i) {
      diff = std::max(diff, static_cast<double>(std::abs(wa[i] - wb[i])));
      norm = std::max(norm, static_cast<double>(std::abs(wb[i])));
      bitwise_different += wa[i] != wb[i];
    }
    EXPECT_LE(diff, rel * norm) << bitwise_different << " of " << wa.size() << " weights differ";
    std::printf("%s vs %s: %zu of %zu weights differ, max |diff| %g (max |w| %g)\n", a.filename().c_str(),
                b.filename().c_str(), bitwise_different, wa.size(), diff, norm);
  }

  static fs::path root_;
};
fs::path MpiTraining::root_;

TEST_F(MpiTraining, TwoRanksGiveOneProcessResultAndRepeatBitForBit) {
  const int steps = 50;
  auto r = testing::run_gatedlm(train_args(root_ / "one_x4", steps, 4));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = mpirun(2, train_args(root_ / "two_x2_a", steps, 2));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("data-parallel on Open MPI"), std::string::npos) << r.output;
  r = mpirun(2, train_args(root_ / "two_x2_b", steps, 2));
  ASSERT_EQ(r.exit_code, 0) << r.output;

  // Rank 0 alone wrote the run: one record per step, with the allreduce time.
  const Metrics m = read_metrics(root_ / "two_x2_a");
  ASSERT_EQ(m.steps.size(), static_cast<size_t>(steps));
  EXPECT_EQ(m.evals.size(), 3u);  // steps 20, 40 and the end
  for (const json& s : m.steps) EXPECT_GT(s.at("allreduce_s").get<double>(), 0.0);
  // The global batch is recorded, not the per-rank one.
  EXPECT_EQ(json::parse(testing::read_file(root_ / "two_x2_a" / "train_config.json"))["grad_accum"], 4);

  expect_same_run(root_ / "two_x2_a", root_ / "one_x4", 1e-6);
  expect_same_run(root_ / "two_x2_a", root_ / "two_x2_b", 0.0);
  EXPECT_EQ(testing::read_file(root_ / "two_x2_a" / "checkpoints" / "step_00000050" / "optimizer.safetensors"),
            testing::read_file(root_ / "two_x2_b" / "checkpoints" / "step_00000050" / "optimizer.safetensors"));
  for (const char* file : {"metrics.jsonl"}) {
    // Equal but for the timings.
    const Metrics a = read_metrics(root_ / "two_x2_a"), b = read_metrics(root_ / "two_x2_b");
    for (size_t i = 0; i < a.steps.size(); ++i) EXPECT_EQ(a.steps[i]["loss"], b.steps[i]["loss"]) << file;
  }
}

// How a 2-rank job ended after `signal` reached rank 1 (or the launcher itself) once the
// run's first checkpoint existed.
struct SignalledJob {
  int exit_code = 0;
  double stop_s = 0;  // from the signal to the launcher's exit
  std::string output;
};

class MpiSignals : public MpiTraining {
 protected:
  // Long enough that the signal, sent once step 10 is saved, lands well before the end on
  // a quiet machine too (150 steps of this model take about a second there).
  static constexpr int kSteps = 1500;

  static SignalledJob signal_job(const fs::path& run, int signal, bool to_launcher) {
    const fs::path log = run.string() + ".log";
    const pid_t launcher =
        testing::spawn_program(kMpiexec, mpirun_args(2, train_args(run, kSteps, 1)), log.string());
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    while (!fs::exists(run / "latest") && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const pid_t target = to_launcher ? launcher : find_rank(launcher, 1);
    if (target <= 0) ::kill(launcher, SIGKILL);
    EXPECT_GT(target, 0) << "rank 1 not found under mpirun " << launcher;
    if (target > 0) ::kill(target, signal);
    const auto signalled_at = Clock::now();
    SignalledJob job;
    job.exit_code = testing::wait_exit_code(launcher);
    job.stop_s = std::chrono::duration<double>(Clock::now() - signalled_at).count();
    job.output = testing::read_file(log);
    if (target > 0 && !to_launcher) ::kill(target, SIGKILL);  // a stopped rank the launcher left behind
    return job;
  }

  // One process, --grad-accum 2: what every stopped-and-resumed run must end equal to.
  static fs::path straight_run() {
    const fs::path run = root_ / "straight";
    if (!fs::exists(run / "summary.json")) {
      auto r = testing::run_gatedlm(train_args(run, kSteps, 2));
      EXPECT_EQ(r.exit_code, 0) << r.output;
    }
    return run;
  }
};

TEST_F(MpiSignals, KilledRankStopsTheJobAndTheCheckpointResumesInOneProcess) {
  const fs::path run = root_ / "killed";
  const SignalledJob job = signal_job(run, SIGKILL, false);
  EXPECT_NE(job.exit_code, 0) << job.output;
  EXPECT_LT(job.stop_s, 10.0) << "the job took " << job.stop_s << " s to stop\n" << job.output;
  EXPECT_NE(job.output.find("rank 1"), std::string::npos) << "the message does not name the rank:\n" << job.output;
  ASSERT_FALSE(fs::exists(run / "summary.json")) << "the run ended before rank 1 was killed:\n" << job.output;
  // The global step (2 micro-batches) is now one process's --grad-accum 2.
  auto r = testing::run_gatedlm({"train", "--resume", run.string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_same_run(run, straight_run(), 1e-6);
}

TEST_F(MpiSignals, CtrlCSavesOnceAndTheRunResumesOnTwoRanks) {
  const fs::path run = root_ / "interrupted";
  const SignalledJob job = signal_job(run, SIGINT, true);
  EXPECT_NE(job.exit_code, 0) << job.output;
  EXPECT_NE(job.output.find("interrupted at step"), std::string::npos) << job.output;
  ASSERT_EQ(json::parse(testing::read_file(run / "summary.json"))["outcome"], "interrupted") << job.output;
  auto r = mpirun(2, {"train", "--resume", run.string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_same_run(run, straight_run(), 1e-6);
}

TEST_F(MpiSignals, StoppedRankEndsTheJobAtTheTimeout) {
  ::setenv("GATEDLM_DIST_TIMEOUT_S", "2", 1);
  const SignalledJob job = signal_job(root_ / "stopped", SIGSTOP, false);
  ::unsetenv("GATEDLM_DIST_TIMEOUT_S");
  EXPECT_NE(job.exit_code, 0) << job.output;
  EXPECT_LT(job.stop_s, 15.0) << job.output;
  EXPECT_NE(job.output.find("GATEDLM_DIST_TIMEOUT_S"), std::string::npos) << job.output;
}

TEST_F(MpiTraining, ErrorsAllRanksMeetAreReportedOnceAndUnevenSplitsRefused) {
  const fs::path run = root_ / "three";
  auto r = testing::run_gatedlm(train_args(run, 4, 3));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // A run directory that exists: refused by rank 0, reported once, no hang.
  r = mpirun(2, train_args(run, 4, 1));
  EXPECT_NE(r.exit_code, 0) << r.output;
  const std::string needle = "already exists";
  const size_t first = r.output.find(needle);
  ASSERT_NE(first, std::string::npos) << r.output;
  EXPECT_EQ(r.output.find(needle, first + 1), std::string::npos) << "reported more than once:\n" << r.output;
  // 3 micro-batches per step cannot be shared by 2 ranks.
  r = mpirun(2, {"train", "--resume", run.string(), "--steps", "6"});
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("cannot share them evenly"), std::string::npos) << r.output;
  // --grad-accum is per rank on resume too: 2 ranks x 2 is not the run's 3.
  r = mpirun(2, {"train", "--resume", run.string(), "--grad-accum", "2"});
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("per rank"), std::string::npos) << r.output;
}

TEST_F(MpiTraining, AllreduceOnThreeRanksSumsExactly) {
  // 131 float64 (shards of 44, 44, 43) and 1 MiB; the bench checks every sum on every rank.
  auto r = testing::run_program(kMpiexec, mpirun_args(3, {"bench", "allreduce", "--mb", "0.001", "1", "--reps", "2"}));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  int lines = 0;
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] != '{') continue;
    const json j = json::parse(line);
    EXPECT_EQ(j["ranks"], 3) << line;
    EXPECT_EQ(j["correct"], true) << line;
    ++lines;
  }
  EXPECT_EQ(lines, 2) << r.output;
}

// MoE with the global load balance (train/moe_balance.h): the expert loads are summed over
// the ranks, so 2 ranks give one process's run, with one micro-batch per rank (counts summed
// between forward and backward) and with two (the counting pass first).
TEST_F(MpiTraining, MoeGlobalLoadBalanceOverRanksGivesOneProcessResult) {
  json c = json::parse(testing::read_file(root_ / "model.json"));
  c["moe"] = {{"n_experts", 8}, {"top_k", 2}, {"expert_hidden", 24}, {"lb_coef", 0.05}, {"z_coef", 0.001}};
  const fs::path config = root_ / "moe.json";
  std::ofstream(config) << c.dump();
  auto args = [&](const fs::path& run, int grad_accum) {
    std::vector<std::string> a = train_args(run, 12, grad_accum);
    a[2] = config.string();  // --config
    return a;
  };
  for (int per_rank : {1, 2}) {
    const fs::path one = root_ / cat("moe_one_x", 2 * per_rank), two = root_ / cat("moe_two_x", per_rank);
    auto r = testing::run_gatedlm(args(one, 2 * per_rank));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    r = mpirun(2, args(two, per_rank));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    expect_same_run(one, two, 1e-6);
    const Metrics a = read_metrics(one), b = read_metrics(two);
    for (size_t i = 0; i < a.steps.size(); ++i)
      EXPECT_TRUE(close(a.steps[i]["lb_loss"].get<double>(), b.steps[i]["lb_loss"].get<double>(), 1e-9))
          << "step " << i + 1 << ": " << a.steps[i]["lb_loss"] << " vs " << b.steps[i]["lb_loss"];
  }
}

// A hybrid model (Gated DeltaNet layers beside a softmax layer): two ranks give the one-process run.
TEST_F(MpiTraining, HybridModelOnTwoRanksGivesOneProcessResult) {
  json c = json::parse(testing::read_file(root_ / "model.json"));
  c["n_layers"] = 4;
  c["full_attention_interval"] = 2;
  c["linear_attention"] = {{"n_k_heads", 2}, {"n_v_heads", 4}, {"k_head_dim", 8}, {"v_head_dim", 6}};
  c["norm_zero_centered"] = true;
  const fs::path config = root_ / "hybrid.json";
  std::ofstream(config) << c.dump();
  auto args = [&](const fs::path& run, int grad_accum) {
    std::vector<std::string> a = train_args(run, 8, grad_accum);
    a[2] = config.string();  // --config
    return a;
  };
  const fs::path one = root_ / "hybrid_one_x2", two = root_ / "hybrid_two_x1";
  auto r = testing::run_gatedlm(args(one, 2));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = mpirun(2, args(two, 1));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_same_run(one, two, 1e-6);
}

TEST(MpiBuild, VersionSaysWhetherMpiIsBuiltIn) {
  auto r = testing::run_gatedlm({"--version"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(kMpiexec.empty() ? "MPI: not built in" : "MPI: Open MPI"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace gatedlm
