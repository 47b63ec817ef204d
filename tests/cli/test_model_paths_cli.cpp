// Every command that runs a model takes any model path through the one loader
// (io/model_loader.h): a checkpoint, its GGUF export and its Hugging Face export give the
// same scores and the same greedy tokens bit for bit (all F32), and a GGUF file brings its
// own vocabulary as the tokenizer. A path that holds no model is refused by name.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "expect_refused.h"
#include "small_tokenizer_json.h"
#include "test_files.h"

namespace gatedlm::testing {
namespace {

using nlohmann::json;

class ModelPathsCli : public ::testing::Test {
 protected:
  ModelPathsCli() : dir_("model_paths_cli") {
    const json config{{"vocab_size", 32}, {"d_model", 32}, {"n_layers", 2},    {"n_heads", 2},
                      {"n_kv_heads", 1},  {"head_dim", 16}, {"ffn_hidden", 64}, {"max_seq_len", 32},
                      {"init_std", 0.3}};
    write_file(dir_ / "config.json", config.dump());
    expect_ok({"init", "--config", (dir_ / "config.json").string(), "--out", ck().string()});
    write_file(ck() / "tokenizer.json", small_tokenizer().dump());
    expect_ok({"export", ck().string(), "--format", "gguf", "--out", (dir_ / "gguf").string()});
    expect_ok({"export", ck().string(), "--format", "qwen3", "--out", hf().string()});
    write_file(dir_ / "ids.txt", "1 2 3 4 5 6 7 8\n3 1 4 1 5 9 2 6 5\n");
  }
  static void expect_ok(const std::vector<std::string>& args) {
    const CliResult r = run_gatedlm(args);
    EXPECT_EQ(r.exit_code, 0) << r.output;
  }
  fs::path ck() const { return dir_ / "ck"; }
  fs::path gguf() const { return dir_ / "gguf" / "model.gguf"; }
  fs::path hf() const { return dir_ / "hf"; }
  std::vector<fs::path> every_path() const { return {ck(), gguf(), hf()}; }
  TempDir dir_;
};

// The last line of a command's output: its JSON (an import's progress goes before it, to stderr).
std::string last_line(const std::string& output) {
  const size_t end = output.find_last_not_of('\n');
  const size_t start = output.rfind('\n', end);
  return output.substr(start == std::string::npos ? 0 : start + 1, end + 1 - (start == std::string::npos ? 0 : start + 1));
}

TEST_F(ModelPathsCli, ScoreEvalAndDebugDecodeAgreeOnEveryPath) {
  std::vector<std::string> scores;
  for (const fs::path& p : every_path()) {
    const CliResult r = run_gatedlm({"score", "--checkpoint", p.string(), "--token-ids", (dir_ / "ids.txt").string(),
                                     "--json", "--logprobs"});
    ASSERT_EQ(r.exit_code, 0) << p << "\n" << r.output;
    scores.push_back(last_line(r.output));
  }
  EXPECT_EQ(scores[1], scores[0]);
  EXPECT_EQ(scores[2], scores[0]);
  for (const fs::path& p : every_path()) {
    const fs::path out = dir_ / (p.filename().string() + ".decode.safetensors");
    const CliResult r = run_gatedlm({"debug", "decode", "--checkpoint", p.string(), "--token-ids",
                                     (dir_ / "ids.txt").string(), "--out", out.string()});
    ASSERT_EQ(r.exit_code, 0) << p << "\n" << r.output;
  }
  EXPECT_EQ(read_file(dir_ / "model.gguf.decode.safetensors"), read_file(dir_ / "ck.decode.safetensors"));
  EXPECT_EQ(read_file(dir_ / "hf.decode.safetensors"), read_file(dir_ / "ck.decode.safetensors"));
}

// generate needs a tokenizer: the checkpoint's tokenizer.json beside it, the GGUF file's
// vocabulary, the Hugging Face directory's tokenizer.json (export copies it).
TEST_F(ModelPathsCli, GenerateGreedyIsTheSameTokensOnEveryPath) {
  std::vector<std::string> outputs;
  for (const fs::path& p : every_path()) {
    const CliResult r = run_gatedlm({"generate", "--checkpoint", p.string(), "--prompt", "abcab", "--max-tokens", "12",
                                     "--temperature", "0", "--json"});
    ASSERT_EQ(r.exit_code, 0) << p << "\n" << r.output;
    const json j = json::parse(last_line(r.output));  // timings and the tokenizer's source differ; the tokens must not
    outputs.push_back(json{{"ids", j["ids"]}, {"text", j["text"]}, {"finish_reason", j["finish_reason"]}}.dump());
  }
  EXPECT_EQ(outputs[1], outputs[0]);
  EXPECT_EQ(outputs[2], outputs[0]);
}

TEST_F(ModelPathsCli, RefusesPathsThatHoldNoModel) {
  write_file(dir_ / "notes.txt", "hello");
  expect_refused({"score", "--checkpoint", (dir_ / "notes.txt").string(), "--token-ids", (dir_ / "ids.txt").string()},
                 {"notes.txt", "not GGUF", "\"hell\""});
  fs::create_directories(dir_ / "empty");
  expect_refused({"eval", "--checkpoint", (dir_ / "empty").string(), "--text", (dir_ / "ids.txt").string(),
                  "--tokenizer", "byte"},
                 {"empty", "not a model"});
}

}  // namespace
}  // namespace gatedlm::testing
