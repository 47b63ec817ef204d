// gatedlm demo end to end with the smoke preset (a tiny model, a few steps) on text the
// test writes: tokenizer, shards, both runs, evaluation on both domains, probes, report
// and the Table-4 style results. No network: the corpus and the held-out text are given,
// and the run without --heldout has no npm on its PATH.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli_runner.h"
#include "core/rng.h"

namespace gatedlm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::run_gatedlm;

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Sentences of common English words, seeded: enough text for a 320-piece tokenizer.
void write_text(const fs::path& p, int paragraphs, uint64_t seed) {
  static const char* const words[] = {
      "the",   "of",    "and",   "to",    "a",     "in",    "that",  "is",     "was",    "he",    "for",
      "it",    "with",  "as",    "his",   "on",    "be",    "at",    "by",     "this",   "had",   "not",
      "are",   "but",   "from",  "or",    "have",  "an",    "they",  "which",  "one",    "you",   "were",
      "her",   "all",   "she",   "there", "would", "their", "we",    "him",    "been",   "has",   "when",
      "who",   "will",  "more",  "no",    "if",    "out",   "so",    "said",   "what",   "up",    "its",
      "about", "into",  "than",  "them",  "can",   "only",  "other", "new",    "some",   "could", "time",
      "these", "two",   "may",   "then",  "do",    "first", "any",   "my",     "now",    "such",  "like",
      "our",   "over",  "man",   "me",    "even",  "most",  "made",  "after",  "also",   "did",   "many",
      "state", "union", "ship",  "whale", "sea",   "people", "year", "great",  "nation", "peace", "war"};
  const int n = static_cast<int>(sizeof(words) / sizeof(words[0]));
  Rng rng(seed);
  std::ofstream out(p);
  for (int par = 0; par < paragraphs; ++par) {
    for (int k = 0; k < 60; ++k) {
      std::string w = words[rng.below(n)];
      if (k % 12 == 0) w[0] = static_cast<char>(w[0] - 'a' + 'A');
      out << w << (k % 12 == 11 ? ". " : " ");
    }
    out << "\n\n";
  }
}

class DemoSmokeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gatedlm_demo_smoke_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    write_text(dir_ / "corpus.txt", 100, 1);
    write_text(dir_ / "heldout.txt", 20, 2);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  std::vector<std::string> demo_args(const fs::path& out) const {
    return {"demo",  "--preset", std::string(GATEDLM_SOURCE_DIR) + "/configs/demo/smoke.json",
            "--corpus", (dir_ / "corpus.txt").string(), "--out", out.string(), "--cache", (dir_ / "cache").string()};
  }
  fs::path dir_;
};

// The moe preset (issue 17) end to end: its own file, with only the budget and the
// tokenizer made tiny. Both models are the preset's all-MoE decoder (the gated one with
// G1), train the same steps with the global load balance logged, and are probed, with
// the expert load in their analyses.
TEST_F(DemoSmokeTest, MoePresetRunsEndToEndOnATinyBudget) {
  json preset = json::parse(read(std::string(GATEDLM_SOURCE_DIR) + "/configs/demo/moe.json"));
  ASSERT_TRUE(preset["model"]["moe"].is_object());
  preset["tokenizer_vocab"] = 320;
  preset["evals"] = 1;
  preset["saves"] = 1;
  preset["analyze_sequences"] = 2;
  preset["analyze_seq_len"] = 64;
  preset["heldout_tokens"] = 1024;
  preset["train"]["eval_tokens"] = 1024;
  preset["train"]["seq_len"] = 64;
  std::ofstream(dir_ / "moe.json") << preset.dump(1);
  const fs::path out = dir_ / "moe_out";
  const auto r = run_gatedlm({"demo", "--preset", (dir_ / "moe.json").string(), "--corpus",
                              (dir_ / "corpus.txt").string(), "--heldout", (dir_ / "heldout.txt").string(), "--steps",
                              "3", "--out", out.string(), "--cache", (dir_ / "cache").string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* run : {"baseline", "gated-sdpa"}) {
    const fs::path rd = out / "runs" / run;
    const json summary = json::parse(read(rd / "summary.json"));
    EXPECT_EQ(summary["outcome"], "completed") << run;
    EXPECT_EQ(summary["steps"], 3) << run;
    const json config = json::parse(read(rd / "config.json"));
    EXPECT_EQ(config["moe"]["n_experts"], preset["model"]["moe"]["n_experts"]) << run;
    EXPECT_EQ(config["moe"]["top_k"], preset["model"]["moe"]["top_k"]) << run;
    EXPECT_NE(read(rd / "metrics.jsonl").find("\"lb_loss\""), std::string::npos) << run;
    const json analysis = json::parse(read(rd / "analysis.json"));
    EXPECT_TRUE(analysis.contains("experts")) << run;
    EXPECT_EQ(analysis["gates"].is_null(), std::string(run) == "baseline");
  }
  const json res = json::parse(read(out / "results.json"));
  ASSERT_EQ(res["runs"].size(), 2u);
  EXPECT_EQ(res["runs"][0]["tokens_seen"], res["runs"][1]["tokens_seen"]);
}

TEST_F(DemoSmokeTest, BothRunsAnalysesReportAndTable) {
  const fs::path out = dir_ / "out";
  std::vector<std::string> args = demo_args(out);
  args.insert(args.end(), {"--heldout", (dir_ / "heldout.txt").string()});
  const auto r = run_gatedlm(args);
  ASSERT_EQ(r.exit_code, 0) << r.output;

  // The table on stdout, in the form of Table 4.
  for (const char* s : {"Table 4 in miniature", "| Method", "Gate Score", "M-Act", "F-Attn", "Val PPL", "Val BPB",
                        "Held-out BPB", "Spikes", "tok/s", "(1) Baseline", "(2) SDPA Elementwise Gate"})
    EXPECT_NE(r.output.find(s), std::string::npos) << s << "\n" << r.output;
  EXPECT_NE(r.output.find("difference"), std::string::npos);  // the parameter counts and their difference

  // Both runs finished with the same budget; both analyses; the report.
  for (const char* run : {"baseline", "gated-sdpa"}) {
    const fs::path rd = out / "runs" / run;
    const json summary = json::parse(read(rd / "summary.json"));
    EXPECT_EQ(summary["outcome"], "completed") << run;
    EXPECT_EQ(summary["steps"], 8) << run;
    const json analysis = json::parse(read(rd / "analysis.json"));
    EXPECT_EQ(analysis["format"], "gatedlm-analysis") << run;
    EXPECT_EQ(analysis["gates"].is_null(), std::string(run) == "baseline");
    EXPECT_TRUE(fs::exists(rd / "heldout.json")) << run;
    // Probes and validation during training (the report's "Probes during training" and
    // validation curve): the preset's counts, spread over the 8 steps, the last at step 8.
    int64_t probes = 0, evals = 0, last_probe = 0, last_eval = 0;
    std::istringstream metrics(read(rd / "metrics.jsonl"));
    for (std::string line; std::getline(metrics, line);) {
      const json rec = json::parse(line);
      if (rec.contains("f_attn")) ++probes, last_probe = rec["step"].get<int64_t>();
      if (rec.contains("val_loss")) ++evals, last_eval = rec["step"].get<int64_t>();
    }
    const json preset = json::parse(read(std::string(GATEDLM_SOURCE_DIR) + "/configs/demo/smoke.json"));
    EXPECT_EQ(probes, preset["probes"].get<int64_t>()) << run;
    EXPECT_EQ(evals, preset["evals"].get<int64_t>()) << run;
    EXPECT_EQ(last_probe, 8) << run;
    EXPECT_EQ(last_eval, 8) << run;
  }
  EXPECT_TRUE(fs::exists(out / "report" / "index.html"));
  const std::string md = read(out / "results.md");
  EXPECT_NE(md.find("| Method"), std::string::npos) << md;
  EXPECT_NE(md.find("(2) SDPA Elementwise Gate"), std::string::npos) << md;

  const json res = json::parse(read(out / "results.json"));
  for (const char* k : {"format", "command", "preset", "corpus", "heldout", "tokenizer", "data", "train_config",
                        "params_difference", "ffn_hidden", "runs", "report", "wall_s"})
    EXPECT_TRUE(res.contains(k)) << k;
  ASSERT_EQ(res["runs"].size(), 2u);
  const json &b = res["runs"][0], &g = res["runs"][1];
  for (const json* run : {&b, &g}) {
    for (const char* k : {"params", "tokens_seen", "val_ppl", "val_bpb", "heldout_bpb", "m_act", "f_attn", "spikes",
                          "tokens_per_s", "attn_out_sparsity_lt_1e-2"})
      EXPECT_TRUE((*run)[k].is_number()) << (*run)["name"] << " " << k;
    EXPECT_EQ((*run)["outcome"], "completed");
  }
  EXPECT_TRUE(b["gate_score"].is_null());
  EXPECT_TRUE(g["gate_score"].is_number());
  EXPECT_EQ(b["tokens_seen"], g["tokens_seen"]);
  EXPECT_EQ(res["params_difference"].get<int64_t>(), g["params"].get<int64_t>() - b["params"].get<int64_t>());
  // The FFN narrowing matches the totals to within one FFN column per layer (3 x d_model x n_layers).
  EXPECT_LE(std::llabs(res["params_difference"].get<int64_t>()), 3 * 32 * 2);
  EXPECT_LT(res["ffn_hidden"]["gated"].get<int64_t>(), res["ffn_hidden"]["baseline"].get<int64_t>());

  // Again: everything is reused.
  const auto again = run_gatedlm(args);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("reusing the finished run"), std::string::npos) << again.output;
  EXPECT_EQ(again.output.find("training /"), std::string::npos) << again.output;
  EXPECT_EQ(json::parse(read(out / "results.json"))["runs"][1]["val_bpb"], g["val_bpb"]);
}

TEST_F(DemoSmokeTest, NoNpmSkipsTheHeldOutDomainWithANote) {
  // No npm (nor anything else) on PATH: the held-out corpus cannot be fetched.
  const char* old = std::getenv("PATH");
  const std::string saved = old ? old : "";
  ::setenv("PATH", (dir_ / "empty-path").string().c_str(), 1);
  const auto r = run_gatedlm(demo_args(dir_ / "out"));
  ::setenv("PATH", saved.c_str(), 1);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("held-out evaluation skipped"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("npm"), std::string::npos) << r.output;
  const json res = json::parse(read(dir_ / "out" / "results.json"));
  EXPECT_TRUE(res["heldout_note"].is_string());
  EXPECT_TRUE(res["runs"][0]["heldout_bpb"].is_null());
  EXPECT_TRUE(res["runs"][1]["val_bpb"].is_number());

  // Without --corpus, the error names the corpus and how to give one.
  ::setenv("PATH", (dir_ / "empty-path").string().c_str(), 1);
  const auto e = run_gatedlm({"demo", "--preset", std::string(GATEDLM_SOURCE_DIR) + "/configs/demo/smoke.json",
                              "--out", (dir_ / "out2").string(), "--cache", (dir_ / "cache").string()});
  ::setenv("PATH", saved.c_str(), 1);
  EXPECT_EQ(e.exit_code, 1) << e.output;
  EXPECT_NE(e.output.find("State of the Union"), std::string::npos) << e.output;
  EXPECT_NE(e.output.find("--corpus PATH"), std::string::npos) << e.output;
}

// Issue 18 row 13: the machine gets busy right after the speed probe (threads spinning on
// every core); the demo still holds --minutes within about 10 %, and both models are cut to
// the same step count with the same schedule. With a fixed thread count spinning threads
// collapsed here (up to 1000x slower per step on a CI machine); the default count adapts.
TEST_F(DemoSmokeTest, HoldsTheMinutesBudgetWhenTheMachineGetsBusyAfterTheProbe) {
  const fs::path out = dir_ / "busy";
  std::vector<std::string> args = demo_args(out);
  args.insert(args.end(), {"--minutes", "1", "--heldout", (dir_ / "heldout.txt").string()});
  const fs::path log = dir_ / "busy.log";
  // The default thread count (not the suite's fixed one): it adapts to the busy cores.
  testing::ScopedEnv adaptive("OMP_NUM_THREADS", nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = testing::spawn_gatedlm(args, log.string());
  while (read(log).find("steps per model (") == std::string::npos &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(90))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::atomic<bool> stop{false};
  std::vector<std::thread> burners;
  for (unsigned i = 0; i < 2 * std::max(1u, std::thread::hardware_concurrency()); ++i)
    burners.emplace_back([&stop] {
      volatile uint64_t x = 0;
      while (!stop.load(std::memory_order_relaxed)) x = x * 6364136223846793005ULL + 1;
    });
  const int code = testing::wait_exit_code(pid);
  stop = true;
  for (auto& t : burners) t.join();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(code, 0) << read(log);
  EXPECT_LT(wall, 60.0 * 1.1) << read(log);
  const json base = json::parse(read(out / "runs" / "baseline" / "summary.json"));
  const json gated = json::parse(read(out / "runs" / "gated-sdpa" / "summary.json"));
  EXPECT_EQ(base["steps"], gated["steps"]);
  EXPECT_EQ(base["outcome"], "completed");
  EXPECT_EQ(gated["outcome"], "completed");
  const json plan = json::parse(read(out / "plan.json"));
  EXPECT_EQ(json::parse(read(out / "runs" / "baseline" / "train_config.json")),
            json::parse(read(out / "runs" / "gated-sdpa" / "train_config.json")));
  // Whether the busy cores slow this tiny model at all depends on the machine: the thread
  // count adapts, and a 2 ms step measured by the probe can run faster afterwards (seen on
  // CI: 0.72-0.83x the probe's time per step, so the plan grew). The budget above is the
  // contract; the re-planning itself is tested on simulated timings (DemoPlan.*). When the
  // runs were cut, the cut is recorded; the tok/s column says it was contended when the
  // slowest segment took over 1.25x the probe's time per step (a cut can also come from a
  // smaller slowdown on a tight budget: seen on a loaded CI machine, no note then).
  if (plan.contains("budget_cut")) {
    EXPECT_EQ(plan["budget_cut"]["trained_steps"], base["steps"]) << plan.dump(2);
    const bool contended = plan["slowest"].get<double>() > 1.25;
    EXPECT_EQ(read(out / "results.md").find("tok/s*") != std::string::npos, contended) << plan.dump(2);
    EXPECT_EQ(json::parse(read(out / "results.json"))["contention"].is_string(), contended) << plan.dump(2);
  }
}

}  // namespace
}  // namespace gatedlm
