// Bigram-Backcopy (eval/synth_bigram_backcopy.h, `gatedlm data synth --task bigram-backcopy`):
// the chains follow the corpus's bigram statistics (checked against pair counts the test
// makes itself from the corpus bytes), every trigger is followed by a copy of the symbol
// before it, every document starts with BOS, the output is a function of the seed, and bad
// options are refused by name with nothing written.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "core/rng.h"
#include "eval/synth_bigram_backcopy.h"
#include "io/token_dataset.h"
#include "test_files.h"
#include "test_fixtures.h"

namespace gatedlm {
namespace {

using testing::corpus_text;

namespace fs = std::filesystem;
using nlohmann::json;
using testing::contains;
using testing::error_of;
using testing::read_file;
using testing::run_gatedlm;
using testing::TempDir;
using testing::write_file;

bool is_in(const std::vector<int32_t>& v, int32_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

class BigramBackcopyCliTest : public ::testing::Test {
 protected:
  void SetUp() override { write_file(dir_ / "corpus.txt", corpus_text(3000, 1)); }
  std::vector<std::string> args(const std::string& out, std::vector<std::string> extra = {}) const {
    std::vector<std::string> a = {"data",    "synth", "--task", "bigram-backcopy", "--tokenizer", "byte",
                                  "--corpus", (dir_ / "corpus.txt").string(), "--out", (dir_ / out).string()};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  TempDir dir_{"bigram_backcopy"};
};

TEST_F(BigramBackcopyCliTest, DocumentsFollowTheCorpusBigramsAndCopyAfterTriggers) {
  const auto r = run_gatedlm(args("ds", {"--tokens", "300000", "--seq-len", "1000", "--seed", "5"}));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const io::TokenDataset ds = io::TokenDataset::open((dir_ / "ds").string());
  const io::DatasetManifest& mf = ds.manifest();
  EXPECT_EQ(mf.tokenizer, "byte");

  // The test's own count of the corpus bytes: symbols, the 3 most frequent, pairs.
  const std::string text = read_file(dir_ / "corpus.txt");
  std::map<int32_t, int64_t> freq;
  std::map<std::pair<int32_t, int32_t>, int64_t> pairs;
  std::map<int32_t, int64_t> row;
  for (size_t i = 0; i < text.size(); ++i) {
    const int32_t a = static_cast<unsigned char>(text[i]);
    ++freq[a];
    if (i + 1 < text.size()) ++pairs[{a, static_cast<unsigned char>(text[i + 1])}], ++row[a];
  }
  std::vector<std::pair<int64_t, int32_t>> ranked;
  for (const auto& [id, c] : freq) ranked.push_back({-c, id});
  std::sort(ranked.begin(), ranked.end());
  const std::vector<int32_t> triggers = {ranked[0].second, ranked[1].second, ranked[2].second};
  const json manifest = json::parse(read_file(dir_ / "ds" / "manifest.json"));
  const json& syn = manifest.at("synthetic");
  EXPECT_EQ(syn["task"], "bigram-backcopy");
  EXPECT_EQ(syn["symbols"], static_cast<int64_t>(freq.size()));
  ASSERT_EQ(syn["triggers"].size(), 3u);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(syn["triggers"][k]["id"], triggers[k]);

  // Layout: documents of 1000 tokens (BOS + 999 symbols) and EOS; enough of them for 300k tokens.
  for (const char* split : {"train", "val"}) {
    const std::vector<int32_t> ids = ds.load_split(split);
    ASSERT_EQ(ids.size() % 1001, 0u) << split;
    for (size_t d = 0; d < ids.size(); d += 1001) {
      ASSERT_EQ(ids[d], mf.bos_id) << split << " document at " << d;
      ASSERT_EQ(ids[d + 1000], mf.eos_id);
      EXPECT_FALSE(is_in(triggers, ids[d + 1])) << "the first symbol is drawn without the triggers";
    }
  }
  const std::vector<int32_t> ids = ds.load_split("train");
  EXPECT_GE(static_cast<int64_t>(ids.size()), 300000);
  EXPECT_LT(static_cast<int64_t>(ids.size()), 300000 + 1001);
  EXPECT_EQ(mf.train.tokens, static_cast<int64_t>(ids.size()));

  // Every trigger is followed by a copy of the symbol before it; the other transitions have
  // the corpus's conditional frequencies.
  std::map<std::pair<int32_t, int32_t>, int64_t> drawn;
  std::map<int32_t, int64_t> drawn_row;
  int64_t copies = 0;
  for (size_t d = 0; d < ids.size(); d += 1001)
    for (size_t i = d + 2; i < d + 1000; ++i) {
      if (is_in(triggers, ids[i - 1])) {
        ASSERT_EQ(ids[i], ids[i - 2]) << "position " << i;
        ++copies;
      } else {
        ++drawn[{ids[i - 1], ids[i]}];
        ++drawn_row[ids[i - 1]];
      }
    }
  EXPECT_GT(copies, 30000);
  int rows_checked = 0;
  for (const auto& [from, n] : drawn_row) {
    for (const auto& kv : drawn) {
      if (kv.first.first == from) {
        EXPECT_GT(pairs[kv.first], 0) << "pair " << from << "->" << kv.first.second;
      }
    }
    if (n < 1000) continue;
    ++rows_checked;
    for (const auto& [pair, c] : pairs) {
      if (pair.first != from) continue;
      const double p = static_cast<double>(c) / static_cast<double>(row[from]);
      const double q = static_cast<double>(drawn[pair]) / static_cast<double>(n);
      EXPECT_NEAR(q, p, 5.0 * std::sqrt(p * (1 - p) / static_cast<double>(n)) + 1e-3)
          << "P(" << pair.second << " | " << from << ")";
    }
  }
  EXPECT_GE(rows_checked, 10);
}

TEST_F(BigramBackcopyCliTest, TheSeedDecidesTheData) {
  for (const char* out : {"a", "b"})
    ASSERT_EQ(run_gatedlm(args(out, {"--count", "20", "--seq-len", "64", "--seed", "11"})).exit_code, 0);
  ASSERT_EQ(run_gatedlm(args("c", {"--count", "20", "--seq-len", "64", "--seed", "12"})).exit_code, 0);
  const std::string a = read_file(dir_ / "a" / "train.bin");
  EXPECT_EQ(a.size(), 24u + 2u * 20 * 65);  // header + uint16 ids: 20 documents of BOS + 63 + EOS
  EXPECT_EQ(a, read_file(dir_ / "b" / "train.bin"));
  EXPECT_EQ(read_file(dir_ / "a" / "val.bin"), read_file(dir_ / "b" / "val.bin"));
  EXPECT_NE(a, read_file(dir_ / "c" / "train.bin"));
  // Explicit trigger ids are used as given.
  ASSERT_EQ(run_gatedlm(args("d", {"--count", "5", "--trigger-ids", "97,101"})).exit_code, 0);
  const json syn = json::parse(read_file(dir_ / "d" / "manifest.json"))["synthetic"];
  ASSERT_EQ(syn["triggers"].size(), 2u);
  EXPECT_EQ(syn["triggers"][0]["id"], 97);
  EXPECT_EQ(syn["triggers"][1]["text"], "e");
}

TEST_F(BigramBackcopyCliTest, BadOptionsAreRefusedByNameAndWriteNothing) {
  write_file(dir_ / "one.txt", "aaaa");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--count", "10", "--tokens", "100"}, "--count or --tokens"},
      {{"--triggers", "0"}, "--triggers"},
      {{"--triggers", "500"}, "distinct symbols"},
      {{"--trigger-ids", "7"}, "does not occur"},
      {{"--trigger-ids", "97,97"}, "twice"},
      {{"--triggers", "2", "--trigger-ids", "97"}, "not both"},
      {{"--seq-len", "2"}, "--seq-len"},
      {{"--val-fraction", "1"}, "--val-fraction"},
      {{"--mix-text", (dir_ / "one.txt").string()}, "--mix-text does not apply"},
      {{"--distractors", "3"}, "--distractors does not apply"},
  };
  for (const auto& [extra, message] : cases) {
    const auto r = run_gatedlm(args("bad", extra));
    EXPECT_NE(r.exit_code, 0) << extra[0];
    EXPECT_TRUE(contains(r.output, message)) << extra[0] << ": " << r.output;
    EXPECT_FALSE(fs::exists(dir_ / "bad" / "manifest.json")) << extra[0];
  }
  // A corpus of one distinct byte has no bigram model; no corpus at all is named.
  auto r = run_gatedlm({"data", "synth", "--task", "bigram-backcopy", "--tokenizer", "byte", "--corpus",
                        (dir_ / "one.txt").string(), "--out", (dir_ / "bad").string()});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "at least 2")) << r.output;
  r = run_gatedlm({"data", "synth", "--task", "bigram-backcopy", "--tokenizer", "byte", "--out", (dir_ / "bad").string()});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "--corpus")) << r.output;
  // The retrieval tasks refuse the bigram-backcopy options.
  r = run_gatedlm({"data", "synth", "--task", "passkey", "--tokenizer", "byte", "--corpus",
                   (dir_ / "corpus.txt").string(), "--out", (dir_ / "bad").string()});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "--corpus does not apply")) << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "bad" / "manifest.json"));
}

}  // namespace
}  // namespace gatedlm
