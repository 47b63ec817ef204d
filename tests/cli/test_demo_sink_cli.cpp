// gatedlm demo --preset sink end to end on a tiny budget: the preset's Bigram-Backcopy data is
// generated from the corpus (bytes, no tokenizer training), both models train the same steps,
// both are probed, and the table reports F-Attn and the sink rate of both. The preset file
// itself is used, with only its budget made tiny (fewer generated tokens, 3 steps, 2 windows).
// And --preset sink-text (the sink on natural text) by name, on the file as it is but for
// --steps: its 512-piece BPE trained on the corpus, natural-text windows, both models probed.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "cli_runner.h"
#include "test_files.h"

namespace gatedlm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::contains;
using testing::read_file;
using testing::run_gatedlm;
using testing::TempDir;
using testing::write_file;

TEST(DemoSinkPresetTest, RunsEndToEndOnATinyBudget) {
  TempDir dir("demo_sink");
  json preset = json::parse(read_file(std::string(GATEDLM_SOURCE_DIR) + "/configs/demo/sink.json"));
  ASSERT_EQ(preset["data"]["task"], "bigram-backcopy");
  preset["data"]["tokens"] = 30000;
  preset["data"]["seq_len"] = 1024;
  preset["data"]["val_fraction"] = 0.05;
  preset["evals"] = 1;
  preset["saves"] = 1;
  preset["analyze_sequences"] = 2;
  preset["train"]["eval_tokens"] = 1024;
  write_file(dir / "sink.json", preset.dump(1));
  std::string text;
  for (int i = 0; i < 400; ++i) text += "the state of the union is strong, and we will keep the peace.\n";
  write_file(dir / "corpus.txt", text);

  const auto r = run_gatedlm({"demo", "--preset", (dir / "sink.json").string(), "--corpus",
                              (dir / "corpus.txt").string(), "--steps", "3", "--out", (dir / "out").string(),
                              "--cache", (dir / "cache").string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "bigram-backcopy")) << r.output;
  EXPECT_TRUE(contains(r.output, "sink rate")) << r.output;
  EXPECT_FALSE(fs::exists(dir / "out" / "tokenizer.model"));  // bytes: nothing to train

  const json manifest = json::parse(read_file(dir / "out" / "data" / "manifest.json"));
  EXPECT_EQ(manifest["tokenizer"], "byte");
  EXPECT_EQ(manifest["synthetic"]["task"], "bigram-backcopy");
  EXPECT_EQ(manifest["synthetic"]["triggers"].size(), 3u);
  EXPECT_EQ(manifest["synthetic"]["seq_len"], 1024);

  const json res = json::parse(read_file(dir / "out" / "results.json"));
  EXPECT_TRUE(res["heldout_note"].is_string());  // no text domain to hold out
  EXPECT_EQ(res["data"]["synthetic"]["task"], "bigram-backcopy");
  ASSERT_EQ(res["runs"].size(), 2u);
  for (const json& run : res["runs"]) {
    EXPECT_EQ(run["outcome"], "completed") << run["name"];
    EXPECT_EQ(run["steps"], 3) << run["name"];
    EXPECT_TRUE(run["f_attn"].is_number()) << run["name"];
    EXPECT_TRUE(run["sink_rate_percent"].is_number()) << run["name"];
  }
  EXPECT_TRUE(res["runs"][0]["gate_score"].is_null());
  EXPECT_TRUE(res["runs"][1]["gate_score"].is_number());
  const std::string md = read_file(dir / "out" / "results.md");
  EXPECT_TRUE(contains(md, "bigram-backcopy chains")) << md;
  EXPECT_TRUE(contains(md, "sink rate %")) << md;
}

// Prose of made-up words (a few hundred distinct ones, from syllables), enough for a 512-piece
// BPE and for the preset's 64 probe windows of 64 tokens in the 5 % held out for validation.
std::string made_up_prose(size_t bytes) {
  const char* syllables[] = {"ka", "lo", "mi", "ren", "sto", "va", "qui", "del", "or", "un", "tha", "bes", "ny", "ge"};
  std::mt19937 rng(7);
  std::string text;
  while (text.size() < bytes) {
    const int words = 5 + static_cast<int>(rng() % 10);
    for (int w = 0; w < words; ++w) {
      const int parts = 1 + static_cast<int>(rng() % 3);
      for (int p = 0; p < parts; ++p) text += syllables[rng() % 14];
      text += w + 1 < words ? " " : ".\n";
    }
  }
  return text;
}

TEST(DemoSinkPresetTest, SinkTextRunsByName) {
  TempDir dir("demo_sink_text");
  write_file(dir / "corpus.txt", made_up_prose(300000));
  const auto r = run_gatedlm({"demo", "--preset", "sink-text", "--corpus", (dir / "corpus.txt").string(), "--heldout",
                              "none", "--steps", "2", "--out", (dir / "out").string(), "--cache",
                              (dir / "cache").string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "vocabulary 512")) << r.output;
  EXPECT_TRUE(fs::exists(dir / "out" / "tokenizer.model"));
  const json manifest = json::parse(read_file(dir / "out" / "data" / "manifest.json"));
  EXPECT_FALSE(manifest.contains("synthetic"));  // the corpus itself, not generated chains
  EXPECT_EQ(manifest["vocab_size"], 512);

  const json res = json::parse(read_file(dir / "out" / "results.json"));
  ASSERT_EQ(res["runs"].size(), 2u);
  for (const json& run : res["runs"]) {
    EXPECT_EQ(run["outcome"], "completed") << run["name"];
    EXPECT_EQ(run["steps"], 2) << run["name"];
    EXPECT_TRUE(run["f_attn"].is_number()) << run["name"];
    EXPECT_TRUE(run["sink_rate_percent"].is_number()) << run["name"];
  }
  EXPECT_TRUE(res["runs"][1]["gate_score"].is_number());
  const json config = json::parse(read_file(dir / "out" / "runs" / "baseline" / "config.json"));
  EXPECT_EQ(config["n_layers"], 2);
  EXPECT_EQ(config["n_heads"], 4);
}

}  // namespace
}  // namespace gatedlm
