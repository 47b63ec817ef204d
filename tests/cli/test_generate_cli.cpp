// gatedlm generate, stream-eval and bench generate through the binary: the same seed
// gives the same text, the JSON they print, the errors for bad flags, stream-eval's
// window without eviction equal to the full cache, and --kv-type f16.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli_checkpoint.h"
#include "cli_runner.h"
#include "small_tokenizer_json.h"
#include "test_files.h"

namespace gatedlm::testing {
namespace {

using nlohmann::json;

constexpr const char* kGenerateConfig =
    R"({"vocab_size": 258, "d_model": 32, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "head_dim": 8,
        "ffn_hidden": 48, "max_seq_len": 32, "gate": {"position": "sdpa"}})";

TEST(GenerateCliTest, SameSeedSameTextAndJsonKeys) {
  TempDir dir("generate");
  const std::string ck = make_checkpoint(dir, "ck", json::parse(kGenerateConfig)).string();
  auto gen = [&](const std::string& seed) {
    const CliResult r = run_gatedlm({"generate", "--checkpoint", ck, "--tokenizer", "byte", "--prompt", "Hello",
                                     "--max-tokens", "12", "--seed", seed, "--top-k", "20", "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r.exit_code == 0 ? last_json_line(r.output) : json::object();
  };
  const json a = gen("7"), b = gen("7"), c = gen("8");
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a["ids"], b["ids"]);
  EXPECT_EQ(a["text"], b["text"]);
  EXPECT_NE(a["ids"], c["ids"]);
  EXPECT_EQ(a["prompt_ids"].size(), 6u);  // BOS + 5 bytes
  for (const char* key : {"text", "finish_reason", "prefill_tokens_per_s", "decode_tokens_per_s"})
    EXPECT_TRUE(a.contains(key)) << key;
  // The text streams to stdout without --json: the same text as the JSON's.
  const CliResult plain = run_gatedlm({"generate", "--checkpoint", ck, "--tokenizer", "byte", "--prompt", "Hello",
                                       "--max-tokens", "12", "--seed", "7", "--top-k", "20"});
  EXPECT_EQ(plain.exit_code, 0);
  std::string bytes;  // the byte tokenizer's text of the JSON's ids (raw, where the JSON escapes bad UTF-8)
  for (const json& id : a["ids"])
    if (id.get<int>() < 256) bytes += static_cast<char>(id.get<int>());
  EXPECT_TRUE(contains(plain.output, bytes));
}

TEST(GenerateCliTest, ClearErrors) {
  TempDir dir("generate_err");
  const std::string ck = make_checkpoint(dir, "ck", json::parse(kGenerateConfig)).string();
  CliResult r = run_gatedlm({"generate", "--checkpoint", ck, "--prompt", "x"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "--tokenizer")) << r.output;
  r = run_gatedlm({"generate", "--checkpoint", ck, "--tokenizer", "byte", "--prompt", "x", "--top-p", "1.5"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "--top-p")) << r.output;
  r = run_gatedlm({"generate", "--checkpoint", ck, "--tokenizer", "byte"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "--prompt")) << r.output;
  r = run_gatedlm({"generate", "--checkpoint", ck, "--tokenizer", "byte", "--prompt", "x", "--sinks", "2"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "--window")) << r.output;
}

// An imported model keeps its tokenizer.json beside the checkpoint: generate finds it
// without --tokenizer (and says so in the JSON's "tokenizer").
TEST(GenerateCliTest, TokenizerJsonBesideTheCheckpoint) {
  TempDir dir("generate_tokenizer_json");
  const std::string ck = make_checkpoint(dir, "ck", json::parse(kGenerateConfig)).string();
  write_file(dir / "ck" / "tokenizer.json", small_tokenizer().dump());
  const CliResult r = run_gatedlm({"generate", "--checkpoint", ck, "--prompt", "abc", "--max-tokens", "3", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json out = last_json_line(r.output);
  EXPECT_TRUE(contains(out["tokenizer"].get<std::string>(), "tokenizer.json")) << out.dump();
  EXPECT_EQ(out["prompt_ids"], json::array({9, 8, 2}));  // <|endoftext|> as BOS, "ab" merged, then "c"
}

TEST(StreamEvalCliTest, WindowWithoutEvictionEqualsFullCache) {
  TempDir dir("stream_eval");
  const std::string ck = make_checkpoint(dir, "ck", json::parse(kGenerateConfig)).string();
  write_file(dir / "text.txt", std::string(300, 'a') + "the quick brown fox jumps over the lazy dog");
  auto run = [&](const std::string& window, const std::string& kv_type = "f32") {
    const CliResult r = run_gatedlm({"stream-eval", "--checkpoint", ck, "--tokenizer", "byte", "--text",
                                     (dir / "text.txt").string(), "--window", window, "--sinks", "0,4", "--tokens",
                                     "40", "--kv-type", kv_type, "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r.exit_code == 0 ? last_json_line(r.output) : json::object();
  };
  const json wide = run("60"), narrow = run("8");
  ASSERT_FALSE(wide.empty());
  ASSERT_EQ(wide["results"].size(), 3u);  // sinks 0, 4, then the full cache
  const double full = wide["results"][2]["ppl"].get<double>();
  EXPECT_EQ(wide["results"][2]["cache"], "full");
  EXPECT_NEAR(wide["results"][0]["ppl"].get<double>(), full, 1e-4 * full);
  EXPECT_NEAR(wide["results"][1]["ppl"].get<double>(), full, 1e-4 * full);
  EXPECT_GT(narrow["results"][0]["tokens_after_fill"].get<int64_t>(), 0);
  // An F16 cache: the perplexities within its rounding (5e-4 relative a logit) of the f32 cache's.
  const json half = run("8", "f16");
  ASSERT_EQ(half["results"].size(), 3u);
  EXPECT_EQ(half["kv_type"], "f16");
  for (int i = 0; i < 3; ++i) {
    const double want = narrow["results"][i]["ppl"].get<double>();
    EXPECT_NEAR(half["results"][i]["ppl"].get<double>(), want, 2e-3 * want) << i;
  }
  const CliResult r = run_gatedlm({"stream-eval", "--checkpoint", ck, "--tokenizer", "byte", "--text",
                                   (dir / "text.txt").string(), "--window", "8", "--tokens", "100000"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "--tokens")) << r.output;
}

TEST(BenchGenerateCliTest, PrintsPrefillAndDecodeRates) {
  TempDir dir("bench_generate");
  write_file(dir / "tiny.json", kGenerateConfig);
  const CliResult r = run_gatedlm({"bench", "generate", "--config", (dir / "tiny.json").string(), "--batch", "1,4",
                                   "--prompt-tokens", "8", "--new-tokens", "2", "--reps", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json j = last_json_line(r.output);
  ASSERT_EQ(j["runs"].size(), 2u);
  EXPECT_EQ(j["runs"][1]["batch"], 4);
  for (const json& run : j["runs"]) {
    EXPECT_GT(run["prefill_tokens_per_s"].get<double>(), 0);
    EXPECT_GT(run["decode_tokens_per_s"].get<double>(), 0);
  }
}

// --kv-type f16: the cache's rows take half the bytes (a dense model has no other state),
// the JSON says which type ran, and generate takes the flag and refuses a type it is not.
TEST(BenchGenerateCliTest, AnF16CacheHalvesTheStateAndBadTypesAreRefused) {
  TempDir dir("bench_generate_f16");
  write_file(dir / "tiny.json", kGenerateConfig);
  json state[2];
  for (int half = 0; half < 2; ++half) {
    const CliResult r = run_gatedlm({"bench", "generate", "--config", (dir / "tiny.json").string(), "--batch", "1",
                                     "--prompt-tokens", "8", "--new-tokens", "2", "--reps", "1", "--kv-type",
                                     half ? "f16" : "f32", "--bandwidth-gbs", "10"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const json j = last_json_line(r.output);
    EXPECT_EQ(j["kv_type"], half ? "f16" : "f32");
    state[half] = j["state_bytes_per_sequence"];
  }
  EXPECT_EQ(state[0]["1024"].get<int64_t>(), 2 * 2 * 2 * 8 * 4 * 1024);  // K and V, layers, kv heads, head_dim, f32
  EXPECT_EQ(state[1]["1024"].get<int64_t>() * 2, state[0]["1024"].get<int64_t>());
  const std::string ck = make_checkpoint(dir, "ck", json::parse(kGenerateConfig)).string();
  CliResult r = run_gatedlm({"generate", "--checkpoint", ck, "--tokenizer", "byte", "--prompt", "ab", "--max-tokens",
                             "4", "--temperature", "0", "--kv-type", "f16", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(last_json_line(r.output)["ids"].size(), 4u);
  r = run_gatedlm({"generate", "--checkpoint", ck, "--tokenizer", "byte", "--prompt", "ab", "--kv-type", "q4_0"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "--kv-type")) << r.output;
}

// --kv-type q8_0: Q8_0 blocks of 32 values in 34 bytes (a head row of 32 is one block), the
// same greedy text from the CLI and Python elsewhere; a head_dim that is not whole blocks is
// refused naming it and the other types, before any text.
TEST(BenchGenerateCliTest, AQ8CacheStoresBlocksAndRefusesPartBlocks) {
  TempDir dir("bench_generate_q8");
  json config = json::parse(kGenerateConfig);
  config["head_dim"] = 32;
  write_file(dir / "wide.json", config.dump());
  const CliResult bench = run_gatedlm({"bench", "generate", "--config", (dir / "wide.json").string(), "--batch", "1",
                                       "--prompt-tokens", "8", "--new-tokens", "2", "--reps", "1", "--kv-type", "q8_0",
                                       "--bandwidth-gbs", "10"});
  ASSERT_EQ(bench.exit_code, 0) << bench.output;
  const json j = last_json_line(bench.output);
  EXPECT_EQ(j["kv_type"], "q8_0");
  EXPECT_EQ(j["state_bytes_per_sequence"]["1024"].get<int64_t>(), 2 * 2 * 2 * 34 * 1024);  // K and V, layers, kv heads
  const std::string wide = make_checkpoint(dir, "wide", config).string();
  CliResult r = run_gatedlm({"generate", "--checkpoint", wide, "--tokenizer", "byte", "--prompt", "ab", "--max-tokens",
                             "4", "--temperature", "0", "--kv-type", "q8_0", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(last_json_line(r.output)["ids"].size(), 4u);
  const std::string narrow = make_checkpoint(dir, "narrow", json::parse(kGenerateConfig)).string();
  r = run_gatedlm({"generate", "--checkpoint", narrow, "--tokenizer", "byte", "--prompt", "ab", "--kv-type", "q8_0"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "head_dim") && contains(r.output, "8") && contains(r.output, "--kv-type f16"))
      << r.output;
}

}  // namespace
}  // namespace gatedlm::testing
