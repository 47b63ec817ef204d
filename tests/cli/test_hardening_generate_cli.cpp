// Issue 28, rows 10-13 and the smaller items, through the binary: generate's prompt file
// and context, a sweep spec's seeds, a catastrophic pre-tokenizer regex, the tokenizer
// help, a killed run's temporaries.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_checkpoint.h"
#include "cli_runner.h"
#include "expect_refused.h"
#include "io/tokenizer_json.h"
#include "test_files.h"

namespace gatedlm::testing {
namespace {

using nlohmann::json;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// dir/ck: a random byte-level model whose context (max_seq_len) is 32 tokens (its config in dir/ck.json).
std::string short_context_checkpoint(const TempDir& dir) {
  const json config{{"vocab_size", 258}, {"d_model", 16}, {"n_layers", 1}, {"n_heads", 2},
                    {"n_kv_heads", 1},   {"head_dim", 8},  {"ffn_hidden", 32}, {"max_seq_len", 32}};
  return make_checkpoint(dir, "ck", config).string();
}

std::vector<std::string> generate(const std::string& ck, std::initializer_list<std::string> more) {
  std::vector<std::string> args{"generate", "--checkpoint", ck, "--tokenizer", "byte"};
  args.insert(args.end(), more);
  return args;
}

TEST(HardeningGenerate, EndlessPromptFileIsRefusedAtTheLimit) {
  TempDir dir("harden_prompt_file");
  const std::string ck = short_context_checkpoint(dir);
  const auto start = std::chrono::steady_clock::now();
  expect_refused(generate(ck, {"--prompt-file", "/dev/zero"}), {"/dev/zero", "--prompt-file", "67108864"});
  EXPECT_LT(seconds_since(start), 60.0);  // before the fix: read on without end
}

TEST(HardeningGenerate, TheContextBoundsPromptAndCompletion) {
  TempDir dir("harden_context");
  const std::string ck = short_context_checkpoint(dir);
  // A prompt that fills the context of 32 (with BOS) is refused naming its flag.
  expect_refused(generate(ck, {"--prompt", std::string(31, 'x')}), {"--prompt", "32", "max_seq_len"});
  write_file(dir / "prompt.txt", std::string(40, 'x'));
  expect_refused(generate(ck, {"--prompt-file", (dir / "prompt.txt").string()}),
                 {"--prompt-file", "prompt.txt", "32"});
  // Far more tokens than a context holds: refused by the flag, before any allocation.
  expect_refused(generate(ck, {"--prompt", "Hi", "--max-tokens", "1000000000"}), {"--max-tokens"});
  // The default 128 new tokens pass the context: generation stops where it is full.
  int stopped_at_context = 0;
  for (const char* seed : {"1", "2", "3", "4"}) {
    const CliResult r = run_gatedlm(generate(ck, {"--prompt", "Hi", "--seed", seed, "--json"}));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const json j = last_json_line(r.output);
    EXPECT_LE(j["prompt_ids"].size() + j["ids"].size(), 32u) << r.output;
    EXPECT_NE(j["finish_reason"], "length") << r.output;
    if (j["finish_reason"] == "context") {
      EXPECT_EQ(j["prompt_ids"].size() + j["ids"].size(), 32u);
      ++stopped_at_context;
    }
  }
  EXPECT_GT(stopped_at_context, 0);  // the others sampled EOS first
  // A streaming window asked for: no end but --max-tokens.
  const CliResult w = run_gatedlm(generate(ck, {"--prompt", "Hi", "--window", "8", "--max-tokens", "40", "--json"}));
  ASSERT_EQ(w.exit_code, 0) << w.output;
  const json j = last_json_line(w.output);
  EXPECT_TRUE(j["finish_reason"] == "length" || j["finish_reason"] == "eos") << w.output;
  if (j["finish_reason"] == "length") {
    EXPECT_EQ(j["ids"].size(), 40u);
  }
}

TEST(HardeningGenerate, SweepSpecSeedsAreCappedAndCheckedInOnePass) {
  TempDir dir("harden_sweep_seeds");
  json spec{{"base", {{"d_model", 16}, {"n_layers", 1}, {"n_heads", 2}, {"n_kv_heads", 1}, {"head_dim", 8},
                      {"ffn_hidden", 32}, {"max_seq_len", 32}}},
            {"train", {{"batch_size", 2}, {"seq_len", 16}}},
            {"tokens", 512},
            {"variants", {{{"name", "baseline"}}}}};
  json seeds = json::array();
  for (int s = 0; s < 1000000; ++s) seeds.push_back(s);
  spec["seeds"] = seeds;
  write_file(dir / "many.json", spec.dump());
  const auto start = std::chrono::steady_clock::now();
  expect_refused({"sweep", "--spec", (dir / "many.json").string(), "--out", (dir / "out").string(), "--plan"},
                 {"seeds", "1000000", "1000"});
  EXPECT_LT(seconds_since(start), 60.0);  // before the fix: 10^12 comparisons
  spec["seeds"] = {4, 7, 4};
  write_file(dir / "twice.json", spec.dump());
  expect_refused({"sweep", "--spec", (dir / "twice.json").string(), "--out", (dir / "out").string(), "--plan"},
                 {"seed 4", "twice"});
  expect_refused({"sweep", "--spec", (dir / "twice.json").string(), "--out", (dir / "out").string(), "--plan",
                  "--seeds", "3,5,3"},
                 {"--seeds", "seed 3", "twice"});
}

// A byte-level tokenizer.json (the 256 byte symbols, no merges) whose Split regex is `regex`.
json tokenizer_with_regex(const std::string& regex) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[io::byte_level_symbol(static_cast<unsigned char>(b))] = b;
  return json{{"pre_tokenizer",
               {{"type", "Sequence"},
                {"pretokenizers",
                 {{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}},
                  {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}},
              {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}},
              {"added_tokens", {{{"id", 256}, {"content", "<|endoftext|>"}, {"special", true}}}}};
}

TEST(HardeningGenerate, CatastrophicPreTokenizerRegexEndsWithAnErrorNamingIt) {
  TempDir dir("harden_regex");
  write_file(dir / "tokenizer.json", tokenizer_with_regex("(?:a+)+b|.").dump());
  std::string text;
  for (int i = 0; i < 2000; ++i) text += std::string(22, 'a') + "c";
  const auto start = std::chrono::steady_clock::now();
  expect_refused({"tokenizer", "encode", "--tokenizer", (dir / "tokenizer.json").string(), "--text", text},
                 {"(?:a+)+b|.", "tokenizer.json", "budget"});
  EXPECT_LT(seconds_since(start), 60.0);  // before the fix: 39 s, then success
  // The same regex on text without the runs that trip it encodes as usual.
  const CliResult ok =
      run_gatedlm({"tokenizer", "encode", "--tokenizer", (dir / "tokenizer.json").string(), "--text", "abc b"});
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_TRUE(contains(ok.output, "97 98 99 32 98")) << ok.output;
}

TEST(HardeningGenerate, TokenizerHelpListsEveryKind) {
  for (const char* sub : {"encode", "decode"}) {
    const CliResult r = run_gatedlm({"tokenizer", sub, "--help"});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    for (const char* kind : {"byte", "SentencePiece", "tokenizer.json"}) EXPECT_TRUE(contains(r.output, kind)) << sub << ": " << kind;
  }
}

TEST(HardeningGenerate, ResumeRemovesAKilledWritersTemporaries) {
  TempDir dir("harden_tmp");
  std::string corpus;
  for (int i = 0; i < 3000; ++i) corpus += i % 7 ? "bird " : "sea.\n";
  write_file(dir / "corpus.txt", corpus);
  ASSERT_EQ(run_gatedlm({"data", "prepare", "--tokenizer", "byte", "--input", (dir / "corpus.txt").string(), "--out",
                         (dir / "data").string()})
                .exit_code,
            0);
  short_context_checkpoint(dir);  // writes dir/ck.json
  const std::string run = (dir / "run").string();
  const CliResult first = run_gatedlm({"train", "--config", (dir / "ck.json").string(), "--data",
                                       (dir / "data").string(), "--out", run, "--steps", "2", "--batch-size", "2",
                                       "--seq-len", "16", "--eval-tokens", "64", "--warmup", "1"});
  ASSERT_EQ(first.exit_code, 0) << first.output;
  // What a train killed inside write_file_atomic leaves: pid 999999999 runs nowhere (pid_max < 2^22).
  const fs::path stale = fs::path(run) / "train_config.json.tmp.999999999";
  write_file(stale, "{\"half\": ");
  const CliResult resumed = run_gatedlm({"train", "--resume", run, "--steps", "3"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_FALSE(fs::exists(stale));
}

}  // namespace
}  // namespace gatedlm::testing
