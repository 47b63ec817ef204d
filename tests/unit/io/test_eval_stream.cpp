// The held-out stream of eval/analyze/longctx: a prepared dataset's split or a text file
// with a tokenizer, BOS, bytes per token, the JSON source record, and the errors for a
// tokenizer larger than the model or inputs that are missing or contradictory.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/eval_stream.h"
#include "io/token_dataset.h"
#include "test_files.h"

namespace gatedlm::io {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kByteVocab = 258;  // 256 bytes, BOS, EOS

// Runs f, which must throw a gatedlm::Error whose message holds every one of `parts`.
template <typename F>
void expect_error(F&& f, const std::vector<std::string>& parts) {
  const std::string message = testing::error_of(f);
  for (const std::string& part : parts)
    EXPECT_NE(message.find(part), std::string::npos) << "\"" << part << "\" not in: " << message;
}

EvalSource from_data(const std::string& dir, const std::string& split) { return {"eval", dir, split, "", ""}; }
EvalSource from_text(const std::string& file, const std::string& tokenizer) {
  return {"analyze", "", "val", file, tokenizer};
}

std::string sample_text(int lines) {
  std::string text;
  for (int i = 0; i < lines; ++i) text += "line " + std::to_string(i) + ": the quick brown fox, ünïcödé 日本\n";
  return text;
}

// Each test works in a directory of its own under the system's temporary directory.
class EvalStreamTest : public ::testing::Test {
 protected:

  // A byte-tokenised dataset of sample_text, a fifth of it held out; returns its directory.
  std::string prepare() {
    testing::write_file(dir_ / "input.txt", sample_text(200));
    PrepareOptions o;
    o.tokenizer = "byte";
    o.inputs = {(dir_ / "input.txt").string()};
    o.out = (dir_ / "ds").string();
    o.val_fraction = 0.2;
    prepare_dataset(o);
    return o.out;
  }
  std::string file(const std::string& name, const std::string& text) const {
    testing::write_file(dir_ / name, text);
    return (dir_ / name).string();
  }

  testing::TempDir tmp_{"es"};
  const fs::path& dir_ = tmp_.path();
};

TEST_F(EvalStreamTest, DatasetSplitBosAndBytesPerToken) {
  const std::string dir = prepare();
  const TokenDataset ds = TokenDataset::open(dir);
  const DatasetManifest& m = ds.manifest();
  for (const std::string split : {"val", "train"}) {
    SCOPED_TRACE(split);
    const EvalStream s = load_eval_stream(from_data(dir, split), kByteVocab);
    const SplitInfo& info = split == "val" ? m.val : m.train;
    EXPECT_EQ(s.tokens, ds.load_split(split));
    EXPECT_EQ(static_cast<int64_t>(s.tokens.size()), info.tokens);
    EXPECT_EQ(s.bos, m.bos_id);
    EXPECT_EQ(s.bos, 256);
    EXPECT_EQ(s.tokens.front(), s.bos);  // every document starts with BOS
    EXPECT_DOUBLE_EQ(s.bytes_per_token, static_cast<double>(info.bytes) / static_cast<double>(info.tokens));
    EXPECT_LT(s.bytes_per_token, 1.0);  // BOS and EOS carry no bytes
    ASSERT_NE(s.tokenizer, nullptr);
    EXPECT_EQ(s.tokenizer->name(), "byte");
    EXPECT_EQ(s.origin, dir);
    EXPECT_EQ(s.record["kind"], "data");
    EXPECT_EQ(s.record["dir"], dir);
    EXPECT_EQ(s.record["split"], split);
    EXPECT_EQ(s.record["tokenizer"], "byte");
    EXPECT_EQ(s.record["stream_tokens"], s.tokens.size());
  }
  EXPECT_NE(load_eval_stream(from_data(dir, "val"), kByteVocab).tokens,
            load_eval_stream(from_data(dir, "train"), kByteVocab).tokens);
}

TEST_F(EvalStreamTest, TextFileWithByteTokenizer) {
  const std::string text = sample_text(7);
  const std::string held = file("held.txt", text);
  const EvalStream s = load_eval_stream(from_text(held, "byte"), kByteVocab);
  ASSERT_EQ(s.tokens.size(), text.size());
  for (size_t i = 0; i < text.size(); ++i) ASSERT_EQ(s.tokens[i], static_cast<unsigned char>(text[i])) << i;
  EXPECT_EQ(s.bos, 256);
  EXPECT_DOUBLE_EQ(s.bytes_per_token, 1.0);
  EXPECT_EQ(s.tokenizer->eos_id(), 257);
  EXPECT_EQ(s.origin, held);
  EXPECT_EQ(s.record["kind"], "text");
  EXPECT_EQ(s.record["file"], held);
  EXPECT_EQ(s.record["tokenizer"], "byte");
  EXPECT_EQ(s.record["stream_tokens"], text.size());
  EXPECT_FALSE(s.record.contains("dir"));

  // An empty file: no tokens, and bytes per token stays finite.
  const EvalStream e = load_eval_stream(from_text(file("empty.txt", ""), "byte"), kByteVocab);
  EXPECT_TRUE(e.tokens.empty());
  EXPECT_DOUBLE_EQ(e.bytes_per_token, 0.0);
}

TEST_F(EvalStreamTest, VocabularyLargerThanTheModel) {
  const std::string dir = prepare();
  expect_error([&] { load_eval_stream(from_data(dir, "val"), 100); },
               {dir + ": the tokenizer has 258 ids", "vocab_size 100"});
  const std::string held = file("held.txt", "abc");
  expect_error([&] { load_eval_stream(from_text(held, "byte"), kByteVocab - 1); },
               {"byte: the tokenizer has 258 ids", "vocab_size 257"});
  // A model with room to spare is fine.
  EXPECT_EQ(load_eval_stream(from_text(held, "byte"), 4096).tokens.size(), 3u);
}

TEST_F(EvalStreamTest, MissingOrContradictoryInputs) {
  const EvalSource none{"eval", "", "val", "", ""};
  expect_error([&] { check_eval_source(none); }, {"eval: give --data DIR or --text FILE --tokenizer T"});
  expect_error([&] { load_eval_stream(none, kByteVocab); }, {"eval: give --data DIR"});
  EvalSource both = from_text(file("t.txt", "abc"), "byte");
  both.data = dir_.string();
  expect_error([&] { check_eval_source(both); }, {"analyze: give --data DIR or --text FILE"});
  expect_error([&] { check_eval_source(from_text(both.text, "")); }, {"analyze: --text needs --tokenizer FILE|byte"});
  expect_error([&] { check_eval_source(from_data(dir_.string(), "test")); }, {"--split", "\"test\""});

  // Files that are not there are named.
  const std::string no_dir = (dir_ / "no_such_ds").string(), no_file = (dir_ / "no_such.txt").string(),
                    no_model = (dir_ / "no_such.model").string();
  expect_error([&] { load_eval_stream(from_data(no_dir, "val"), kByteVocab); }, {no_dir});
  expect_error([&] { load_eval_stream(from_text(no_file, "byte"), kByteVocab); }, {no_file});
  expect_error([&] { load_eval_stream(from_text(both.text, no_model), kByteVocab); }, {no_model});
}

}  // namespace
}  // namespace gatedlm::io
