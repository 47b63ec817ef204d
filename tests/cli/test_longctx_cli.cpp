// Long-context tasks, scoring, `gatedlm longctx` and `gatedlm data synth`: needles where
// asked, answers at the end, a hand-built scoring case, the JSON keys, and bad flags
// rejected with messages that name them. Tiny models only.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "core/error.h"
#include "eval/longctx.h"
#include "eval/tasks.h"
#include "io/token_dataset.h"
#include "io/tokenizer.h"

namespace gatedlm::eval {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::run_gatedlm;

std::unique_ptr<io::Tokenizer> byte_tokenizer() { return io::Tokenizer::load("byte"); }

// The CLI on a tiny random checkpoint.
class LongctxCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("gatedlm_longctx_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
    std::ofstream(root_ / "model.json") << R"({"vocab_size": 258, "d_model": 16, "n_layers": 1, "n_heads": 2,
        "n_kv_heads": 1, "head_dim": 8, "ffn_hidden": 32, "max_seq_len": 128, "gate": {"position": "sdpa"}})";
    std::ofstream text(root_ / "text.txt");
    for (int i = 0; i < 200; ++i) text << "Line " << i << " of some held-out text for the perplexity curve.\n";
    text.close();
    auto r = run_gatedlm({"init", "--config", (root_ / "model.json").string(), "--out", ck()});
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string ck() const { return (root_ / "ck").string(); }
  std::string path(const char* name) const { return (root_ / name).string(); }
  std::vector<std::string> base_args() const {
    return {"longctx", "--checkpoint", ck(), "--text", path("text.txt"), "--tokenizer", "byte", "--out",
            path("out.json")};
  }
  void expect_rejected(std::vector<std::string> extra, const std::string& needle) {
    auto args = base_args();
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = run_gatedlm(args);
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << r.output;
  }
  fs::path root_;
};

TEST_F(LongctxCliTest, WritesTheDocumentedJson) {
  auto args = base_args();
  for (const char* a : {"--lengths", "256,512", "--samples", "3", "--rope-scaling", "yarn", "--ppl-windows", "2"})
    args.push_back(a);
  auto r = run_gatedlm(args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(path("out.json"));
  const json j = json::parse(in);
  for (const char* key : {"checkpoint", "data", "tokenizer", "model", "rope_override", "train_len", "samples",
                          "depths", "seed", "filler", "tasks", "lengths", "elapsed_s"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["train_len"], 128);
  EXPECT_EQ(j["rope_override"]["factor"], "auto");
  ASSERT_EQ(j["lengths"].size(), 2u);
  const json& L = j["lengths"][1];
  EXPECT_EQ(L["length"], 512);
  EXPECT_EQ(L["rope"]["scaling"], "yarn");
  EXPECT_EQ(L["rope"]["factor"], 4.0);
  EXPECT_NEAR(L["rope"]["magnitude"].get<double>(), 0.1 * std::log(4.0) + 1, 1e-12);
  const json& p = L["perplexity"];
  for (const char* key : {"windows", "tokens", "loss", "ppl", "loss_within_train_len", "loss_beyond_train_len",
                          "buckets"})
    EXPECT_TRUE(p.contains(key)) << key;
  EXPECT_EQ(p["buckets"].size(), 8u);
  EXPECT_EQ(p["buckets"][7]["end"], 512);
  for (const char* task : {"passkey", "niah_single", "niah_multikey", "niah_multivalue"}) {
    const json& t = L["tasks"][task];
    for (const char* key : {"samples", "values", "score", "digit_accuracy", "mean_logprob", "by_depth"})
      EXPECT_TRUE(t.contains(key)) << task << " " << key;
    EXPECT_EQ(t["samples"], 3);
  }
  EXPECT_EQ(L["tasks"]["niah_multivalue"]["values"], 12);
  // 256 byte tokens cannot hold four needles: skipped with a reason.
  EXPECT_TRUE(j["lengths"][0]["tasks"]["niah_multikey"].contains("skipped"));
}

TEST_F(LongctxCliTest, RejectsBadFlagsNamingThem) {
  // The comma list is split by the command line (CLI11), the values checked by eval/.
  for (const char* bad : {"256,abc", "256,256", "1", "99999999999999999999", "", "2.5"})
    expect_rejected({"--lengths", bad}, "--lengths");
  expect_rejected({"--lengths", "256", "--rope-scaling", "dynamic"}, "--rope-scaling");
  expect_rejected({"--lengths", "256", "--rope-scaling", "yarn", "--factor", "0.5"}, "--factor");
  expect_rejected({"--lengths", "256", "--factor", "2"}, "--rope-scaling");
  expect_rejected({"--lengths", "256", "--original-len", "-3"}, "--original-len");
  expect_rejected({"--lengths", "256", "--tasks", "passkey,haystack"}, "--tasks");
  expect_rejected({"--lengths", "256", "--filler", "lorem"}, "--filler");
  expect_rejected({"--lengths", "256", "--samples", "-1"}, "--samples");
  auto r = run_gatedlm({"longctx", "--checkpoint", ck(), "--lengths", "256", "--out", path("o.json")});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--data"), std::string::npos) << r.output;
}

TEST_F(LongctxCliTest, SynthWritesADatasetOfExamplesMixedWithText) {
  auto r = run_gatedlm({"data", "synth", "--task", "passkey", "--tokenizer", "byte", "--out", path("pk"), "--count",
                        "20", "--seq-len", "300"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const io::TokenDataset pk = io::TokenDataset::open(path("pk"));
  EXPECT_EQ(pk.manifest().train.documents, 20);
  EXPECT_EQ(pk.manifest().val.documents, 2);
  auto tok = byte_tokenizer();
  const std::vector<int32_t> train = pk.load_split("train");
  const std::string text = tok->decode(std::vector<int32_t>(train.begin() + 1, train.end()));
  EXPECT_NE(text.find("The pass key is "), std::string::npos);
  EXPECT_NE(text.find("What is the pass key? The pass key is "), std::string::npos);

  r = run_gatedlm({"data", "synth", "--task", "niah", "--tokenizer", "byte", "--out", path("mix"), "--seq-len", "600",
                   "--mix-text", path("text.txt"), "--ratio", "0.5"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const io::TokenDataset mix = io::TokenDataset::open(path("mix"));
  std::ifstream in(path("mix") + "/manifest.json");
  const json m = json::parse(in);
  ASSERT_TRUE(m.contains("synthetic"));
  EXPECT_NEAR(m["synthetic"]["ratio"].get<double>(), 0.5, 0.1);
  EXPECT_EQ(m["synthetic"]["task"], "niah");
  const std::vector<int32_t> mixed = mix.load_split("train");
  const std::string all = tok->decode(std::vector<int32_t>(mixed.begin() + 1, mixed.end()));
  EXPECT_NE(all.find("special magic numbers for"), std::string::npos);
  EXPECT_NE(all.find("held-out text for the perplexity"), std::string::npos);
  // The validation split is the text's tail only.
  const std::vector<int32_t> val = mix.load_split("val");
  EXPECT_EQ(tok->decode(val).find("magic"), std::string::npos);

  r = run_gatedlm({"data", "synth", "--task", "all", "--tokenizer", "byte", "--out", path("all"), "--count", "8",
                   "--seq-len", "700"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<int32_t> every = io::TokenDataset::open(path("all")).load_split("train");
  const std::string every_text = tok->decode(std::vector<int32_t>(every.begin() + 1, every.end()));
  EXPECT_NE(every_text.find("What is the pass key?"), std::string::npos);
  EXPECT_NE(every_text.find("What are all the special magic numbers for"), std::string::npos);

  auto bad = [&](std::vector<std::string> args, const std::string& needle) {
    auto res = run_gatedlm(args);
    EXPECT_NE(res.exit_code, 0) << res.output;
    EXPECT_NE(res.output.find(needle), std::string::npos) << res.output;
  };
  bad({"data", "synth", "--task", "haystack", "--tokenizer", "byte", "--out", path("x")}, "--task");
  bad({"data", "synth", "--task", "passkey", "--tokenizer", "byte", "--out", path("x"), "--ratio", "0.3"},
      "--mix-text");
  bad({"data", "synth", "--task", "passkey", "--tokenizer", "byte", "--out", path("x"), "--seq-len", "64"},
      "--seq-len");
  bad({"data", "synth", "--task", "passkey", "--tokenizer", "byte", "--out", path("x"), "--mix-text",
       path("text.txt"), "--ratio", "1.5"},
      "--ratio");
  bad({"data", "synth", "--task", "passkey", "--tokenizer", "byte", "--out", path("pk"), "--count", "3"}, "--force");
}

}  // namespace
}  // namespace gatedlm::eval
