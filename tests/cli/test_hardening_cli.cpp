// Issue 18, through the real binary: each row of the issue's table, tried as a hostile or
// careless user would, ends with a non-zero exit and a message naming the flag, key, file
// or line and the limit; nothing half-written becomes current; runs can be started again.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli_runner.h"
#include "core/rng.h"
#include "test_files.h"

namespace gatedlm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::contains;
using testing::read_file;
using testing::run_gatedlm;
using testing::write_file;

class HardeningCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = fs::temp_directory_path() / ("gatedlm_harden_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
    Rng rng(11);
    const char* words[] = {"a", "bird", "sings", "to", "the", "sea", "and", "sky"};
    std::ofstream text(root_ / "corpus.txt");
    for (int i = 0; i < 6000; ++i) text << words[rng.below(8)] << (rng.below(9) == 0 ? ".\n" : " ");
    text.close();
    write_file(root_ / "model.json", model_json().dump());
    auto r = run_gatedlm({"data", "prepare", "--tokenizer", "byte", "--input", (root_ / "corpus.txt").string(),
                          "--out", data().string()});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    r = run_gatedlm({"init", "--config", (root_ / "model.json").string(), "--out", (root_ / "ck").string()});
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }

  static json model_json() {
    return json{{"vocab_size", 258}, {"d_model", 16},     {"n_layers", 1},   {"n_heads", 2},
                {"n_kv_heads", 1},   {"head_dim", 8},     {"ffn_hidden", 32}, {"max_seq_len", 32}};
  }
  static fs::path data() { return root_ / "data"; }
  static std::vector<std::string> train_args(const fs::path& run, const std::string& steps) {
    return {"train",     "--config",     (root_ / "model.json").string(), "--data", data().string(),
            "--out",     run.string(),   "--steps",  steps,  "--batch-size", "2",
            "--seq-len", "16",           "--eval-tokens", "64", "--save-every", "100", "--warmup", "1"};
  }
  // args with `flag` set to `value` (replaced where it is already given).
  static std::vector<std::string> with(std::vector<std::string> args, std::initializer_list<std::string> more) {
    const std::vector<std::string> m(more);
    for (size_t i = 0; i + 1 < m.size(); i += 2) {
      auto it = std::find(args.begin(), args.end(), m[i]);
      if (it != args.end() && it + 1 != args.end()) {
        *(it + 1) = m[i + 1];
      } else {
        args.push_back(m[i]);
        args.push_back(m[i + 1]);
      }
    }
    return args;
  }
  // Runs gatedlm and expects a user error (exit 1, never a crash or "internal error")
  // whose message holds every needle.
  static void expect_refused(const std::vector<std::string>& args, std::initializer_list<std::string> needles) {
    const auto r = run_gatedlm(args);
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_LT(r.exit_code, 128) << "crashed: " << r.output;
    EXPECT_FALSE(contains(r.output, "internal error")) << r.output;
    for (const std::string& n : needles) EXPECT_TRUE(contains(r.output, n)) << "missing \"" << n << "\" in:\n" << r.output;
  }
  // A copy of the initial checkpoint whose config.json gets `key` = value.
  static fs::path checkpoint_with(const std::string& name, const std::string& key, const json& value) {
    const fs::path dir = root_ / name;
    fs::remove_all(dir);
    fs::copy(root_ / "ck", dir);
    json c = json::parse(read_file(dir / "config.json"));
    c[key] = value;
    write_file(dir / "config.json", c.dump());
    return dir;
  }
  static json summary(const fs::path& run) { return json::parse(read_file(run / "summary.json")); }

  static fs::path root_;
};
fs::path HardeningCli::root_;

// Issue 18, row 1: a huge max_seq_len is refused at init and when a checkpoint carries one.
TEST_F(HardeningCli, HugeMaxSeqLenIsRefusedAtInitAndInACheckpoint) {
  json m = model_json();
  m["max_seq_len"] = int64_t{1} << 62;
  write_file(root_ / "huge.json", m.dump());
  expect_refused({"init", "--config", (root_ / "huge.json").string(), "--out", (root_ / "huge_ck").string()},
                 {"huge.json", "max_seq_len", "4194304"});
  EXPECT_FALSE(fs::exists(root_ / "huge_ck"));
  const fs::path ck = checkpoint_with("ck_long", "max_seq_len", int64_t{1} << 61);
  write_file(root_ / "ids1.txt", "1 2 3\n");
  expect_refused({"score", "--checkpoint", ck.string(), "--token-ids", (root_ / "ids1.txt").string()},
                 {"max_seq_len"});
}

// Rows 2, 11 (a 1-id line) and 12 (an id out of range names the file and line).
TEST_F(HardeningCli, ScoreRefusesLinesBeyondMaxSeqLen) {
  std::string line;
  for (int i = 0; i < 1000000; ++i) line += "7 ";
  write_file(root_ / "long.txt", "1 2 3\n" + line + "\n");
  expect_refused({"score", "--checkpoint", (root_ / "ck").string(), "--token-ids", (root_ / "long.txt").string()},
                 {"long.txt:2", "more than 32 token ids", "max_seq_len"});
  write_file(root_ / "one.txt", "5\n");
  expect_refused({"score", "--checkpoint", (root_ / "ck").string(), "--token-ids", (root_ / "one.txt").string()},
                 {"one.txt:1", "at least 2"});
  write_file(root_ / "oov.txt", "1 2\n3 999\n");
  expect_refused({"score", "--checkpoint", (root_ / "ck").string(), "--token-ids", (root_ / "oov.txt").string()},
                 {"oov.txt:2", "999", "0..257"});
  write_file(root_ / "ok.txt", "1 2 3\n");
  const auto r = run_gatedlm({"score", "--checkpoint", (root_ / "ck").string(), "--token-ids",
                              (root_ / "ok.txt").string(), "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// Issue 18, row 3: a resume that failed before its first checkpoint does not eat the new budget.
TEST_F(HardeningCli, AFailedResumeKeepsTheNewBudget) {
  const fs::path run = root_ / "budget";
  auto r = run_gatedlm(train_args(run, "2"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // This resume fails after reading the run (its data is gone) and before any checkpoint.
  r = run_gatedlm({"train", "--resume", run.string(), "--steps", "6", "--data", (root_ / "nowhere").string()});
  ASSERT_NE(r.exit_code, 0) << r.output;
  r = run_gatedlm({"train", "--resume", run.string(), "--steps", "6"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(summary(run)["steps"], 6) << r.output;
  EXPECT_EQ(summary(run)["outcome"], "completed");
  EXPECT_EQ(json::parse(read_file(run / "train_config.json"))["steps"], 6);
  // A hand edit of train_config.json is noticed, not silently used.
  json tc = json::parse(read_file(run / "train_config.json"));
  tc["lr"] = 0.5;
  write_file(run / "train_config.json", tc.dump());
  r = run_gatedlm({"train", "--resume", run.string(), "--steps", "7"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "lr = 0.5") && contains(r.output, "checkpoint's value is used")) << r.output;
  EXPECT_EQ(json::parse(read_file(run / "train_config.json"))["lr"], 0.001);
}

// Issue 18, row 4: an evaluation that cannot run is refused before the run directory exists; a run
// that stopped before its first checkpoint can be started again.
TEST_F(HardeningCli, EvaluationIsCheckedUpFrontAndRunsStayRestartable) {
  const fs::path run = root_ / "evaltok";
  expect_refused(with(train_args(run, "50"), {"--eval-tokens", "1"}), {"--eval-tokens 1", "--seq-len 16"});
  EXPECT_FALSE(fs::exists(run));
  // What a run killed before its first checkpoint leaves behind.
  fs::create_directories(run / "checkpoints" / "step_00000010.partial");
  write_file(run / "config.json", model_json().dump());
  write_file(run / "metrics.jsonl", "{\"step\": 1, \"loss\": 5.5}\n{\"st");
  expect_refused({"train", "--resume", run.string()}, {"never reached its first checkpoint", "--out"});
  auto r = run_gatedlm(train_args(run, "3"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "starting it again")) << r.output;
  EXPECT_EQ(summary(run)["steps"], 3);
  // A run that fails in training before its first checkpoint (here: diverges) can be rerun.
  const fs::path bad = root_ / "diverge";
  r = run_gatedlm(with(train_args(bad, "20"), {"--lr", "1e30", "--clip", "0"}));
  ASSERT_NE(r.exit_code, 0) << r.output;
  r = run_gatedlm(train_args(bad, "2"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  // Other files in the directory are never cleared.
  const fs::path mine = root_ / "mine";
  fs::create_directories(mine);
  write_file(mine / "notes.txt", "keep");
  expect_refused(train_args(mine, "2"), {"already exists and is not empty"});
  EXPECT_EQ(read_file(mine / "notes.txt"), "keep");
}

// Issue 18, row 5: a second writer is refused while the run directory is locked.
TEST_F(HardeningCli, ALockedRunRefusesASecondWriter) {
  const fs::path run = root_ / "locked";
  auto r = run_gatedlm(train_args(run, "2"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const int fd = ::open((run / ".lock").c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  expect_refused({"train", "--resume", run.string(), "--steps", "4"}, {"another gatedlm process", ".lock"});
  const fs::path fresh = root_ / "locked_new";
  fs::create_directories(fresh);
  const int fd2 = ::open((fresh / ".lock").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_EQ(::flock(fd2, LOCK_EX | LOCK_NB), 0);
  expect_refused(train_args(fresh, "2"), {"another gatedlm process"});
  ::close(fd2);
  ::close(fd);
  r = run_gatedlm({"train", "--resume", run.string(), "--steps", "4"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(summary(run)["steps"], 4);
}

// Issue 18, row 6: more distractors than there are keys is refused at once instead of looping.
TEST_F(HardeningCli, TooManyDistractorsAreRefused) {
  const auto t0 = std::chrono::steady_clock::now();
  expect_refused({"data", "synth", "--task", "niah", "--tokenizer", "byte", "--distractors", "1000", "--out",
                  (root_ / "synth").string()},
                 {"--distractors 1000", "575"});
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
}

// Issue 18, row 7: an absurd step size is refused; SIGTERM mid-step is honoured within about a second.
TEST_F(HardeningCli, HugeStepsAreRefusedAndSignalsHonouredMidStep) {
  expect_refused(with(train_args(root_ / "accum", "2"), {"--grad-accum", "1000000000"}),
                 {"grad_accum", "tokens per optimizer step"});
  const fs::path run = root_ / "sigterm";
  const fs::path log = root_ / "sigterm.log";
  const pid_t pid = testing::spawn_gatedlm(with(train_args(run, "2"), {"--grad-accum", "1000000"}), log.string());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!contains(read_file(log), "tokens/step") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  // The handler is installed before that line; half a CPU second more is well inside the
  // first step (a million micro-batches), however loaded the machine.
  EXPECT_TRUE(testing::wait_until_busy(pid, 0.5)) << read_file(log);
  const auto t0 = std::chrono::steady_clock::now();
  ::kill(pid, SIGTERM);
  const int code = testing::wait_exit_code(pid);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(code, 130) << read_file(log);
  EXPECT_LT(took, 3.0) << "SIGTERM took " << took << " s to stop the run";
  EXPECT_EQ(read_file(run / "latest"), "step_00000000\n");
  EXPECT_EQ(summary(run)["outcome"], "interrupted");
}

// Issue 18, row 8: raw library failures become messages naming the file or flag.
TEST_F(HardeningCli, LibraryFailuresBecomeMessages) {
  write_file(root_ / "overflow.json", "{\"vocab_size\": 1e400}");
  expect_refused({"params", "--config", (root_ / "overflow.json").string()}, {"overflow.json", "not valid JSON"});
  const fs::path dir_config = root_ / "ck_dirconfig";
  fs::remove_all(dir_config);
  fs::copy(root_ / "ck", dir_config);
  fs::remove(dir_config / "config.json");
  fs::create_directories(dir_config / "config.json");
  write_file(root_ / "ids8.txt", "1 2 3\n");
  expect_refused({"score", "--checkpoint", dir_config.string(), "--token-ids", (root_ / "ids8.txt").string()},
                 {"config.json", "is a directory"});
  write_file(root_ / "a_file", "x");
  expect_refused(train_args(root_ / "a_file" / "run", "2"), {"--out", "a_file"});
  expect_refused(train_args(root_ / "a_file", "2"), {"--out", "exists and is a file"});
  // A directory symlink loop in the inputs of data prepare is skipped, not followed forever.
  fs::create_directories(root_ / "loop_in");
  fs::copy_file(root_ / "corpus.txt", root_ / "loop_in" / "c.txt");
  fs::create_directory_symlink(root_ / "loop_in", root_ / "loop_in" / "again");
  fs::create_symlink(root_ / "loop_in" / "self", root_ / "loop_in" / "self");
  const auto r = run_gatedlm({"data", "prepare", "--tokenizer", "byte", "--input", (root_ / "loop_in").string(),
                              "--out", (root_ / "loop_data").string()});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "symlink loop")) << r.output;
  // A type-mutated analysis JSON given to report.
  write_file(root_ / "analysis.json",
             R"({"format": "gatedlm-analysis", "gates": {"per_layer": 3, "mean_score": "x"}, "attention_maps": 7,)"
             R"( "f_attn": [1], "config": 5, "source": 3})");
  expect_refused({"report", (root_ / "analysis.json").string(), "--out", (root_ / "a_file" / "rep").string(),
                  "--gnuplot", "/bin/true"},
                 {"a_file"});
  const auto rep = run_gatedlm({"report", (root_ / "analysis.json").string(), "--out", (root_ / "rep").string(),
                                "--gnuplot", "/bin/true"});
  EXPECT_LT(rep.exit_code, 2) << rep.output;  // rendered, or refused naming the file: never an internal error
  if (rep.exit_code != 0) {
    EXPECT_TRUE(contains(rep.output, "analysis.json")) << rep.output;
  }
}

// Issue 18, row 9: NaN or Inf weights are refused by score and eval (non-zero exit).
TEST_F(HardeningCli, NonFiniteWeightsAreErrors) {
  const fs::path ck = root_ / "ck_nan";
  fs::remove_all(ck);
  fs::copy(root_ / "ck", ck);
  std::string bytes = read_file(ck / "model.safetensors");
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(bytes.data() + bytes.size() - 4, &nan, 4);  // the last tensor's last element
  write_file(ck / "model.safetensors", bytes);
  write_file(root_ / "ids9.txt", "1 2 3\n");
  expect_refused({"score", "--checkpoint", ck.string(), "--token-ids", (root_ / "ids9.txt").string(), "--json"},
                 {"model.safetensors", "nan"});
  expect_refused({"eval", "--checkpoint", ck.string(), "--data", data().string(), "--seq-len", "16"},
                 {"model.safetensors", "nan"});
}

// Issue 18, row 11: values that were silently wrapped, clamped or used.
TEST_F(HardeningCli, WrappedClampedOrIgnoredValuesAreRefused) {
  const fs::path run = root_ / "values";
  expect_refused(with(train_args(run, "2"), {"--seq-len", "64"}), {"--seq-len 64", "max_seq_len 32"});
  expect_refused(train_args(run, "99999999999999999999"), {"--steps", "out of range"});
  expect_refused(with(train_args(run, "2"), {"--eval-tokens", "-1"}), {"eval_tokens"});
  expect_refused(with(train_args(run, "2"), {"--seed", "-1"}), {"--seed", "negative"});
  expect_refused(with(train_args(run, "2"), {"--lr", "inf"}), {"--lr", "finite"});
  EXPECT_FALSE(fs::exists(run));
  // trainer_state.json that disagrees with its checkpoint.
  auto r = run_gatedlm(train_args(run, "2"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const fs::path state = run / "checkpoints" / "step_00000002" / "trainer_state.json";
  const std::string good = read_file(state);
  for (const json& step : {json(-7), json(1e15), json(3)}) {
    json s = json::parse(good);
    s["step"] = step;
    write_file(state, s.dump());
    expect_refused({"train", "--resume", run.string(), "--steps", "4"}, {"trainer_state.json", "step"});
  }
  write_file(state, good);
  // Manifests whose byte count or special ids do not fit.
  for (const auto& [key, value] : {std::pair<std::string, json>{"bos_id", 65}, {"val_bytes", 0}}) {
    const fs::path d = root_ / ("data_" + key);
    fs::remove_all(d);
    fs::copy(data(), d);
    json m = json::parse(read_file(d / "manifest.json"));
    if (key == "val_bytes") m["splits"]["val"]["bytes"] = 0;
    else m[key] = value;
    write_file(d / "manifest.json", m.dump());
    expect_refused({"data", "info", d.string()}, {"manifest.json", key == "val_bytes" ? "splits.val" : "bos_id"});
  }
}

// Issue 18, row 12: messages that named the wrong thing.
TEST_F(HardeningCli, MessagesNameTheFlagAtFault) {
  expect_refused({"analyze", "--checkpoint", (root_ / "ck").string(), "--data", data().string(), "--sequences", "0",
                  "--out", (root_ / "an.json").string()},
                 {"--sequences", "at least 1"});
}

}  // namespace
}  // namespace gatedlm
