// Prepared datasets: shard format, manifest, deterministic positional split, and the
// errors TokenDataset::open gives for damaged directories.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "core/sha256.h"
#include "io/token_dataset.h"
#include "io_fixtures.h"
#include "test_files.h"

namespace gatedlm::io {
namespace {

using testing::contains;
using testing::error_of;
using testing::read_file;
using testing::with_threads;
using testing::write_file;

PrepareOptions forced(PrepareOptions o) {
  o.force = true;
  return o;
}
namespace fs = std::filesystem;

std::string sample_text(int lines, const std::string& tag) {
  std::string text;
  for (int i = 0; i < lines; ++i) text += tag + " line " + std::to_string(i) + ": the quick brown fox, ünïcödé 日本\n";
  return text;
}

class TokenDatasetTest : public ::testing::Test {
 protected:

  // A byte-tokenised dataset of one file; returns its directory.
  std::string prepare_one(const std::string& text, double val_fraction = 0.1, const std::string& name = "ds") {
    write_file(dir_ / "input.txt", text);
    PrepareOptions o;
    o.tokenizer = "byte";
    o.inputs = {(dir_ / "input.txt").string()};
    o.out = (dir_ / name).string();
    o.val_fraction = val_fraction;
    prepare_dataset(o);
    return o.out;
  }

  testing::TempDir tmp_{"ds"};
  const fs::path& dir_ = tmp_.path();
};

TEST_F(TokenDatasetTest, ByteDatasetLayoutManifestAndSplit) {
  const std::string text = sample_text(200, "doc");
  const std::string ds_dir = prepare_one(text);

  const nlohmann::json m = nlohmann::json::parse(read_file(fs::path(ds_dir) / "manifest.json"));
  for (const char* key :
       {"format_version", "tokenizer", "vocab_size", "bos_id", "eos_id", "sources", "val_fraction", "splits"}) {
    EXPECT_TRUE(m.contains(key)) << key;
  }
  EXPECT_EQ(m["format_version"], 1);
  EXPECT_EQ(m["tokenizer"], "byte");
  EXPECT_EQ(m["vocab_size"], 258);
  EXPECT_EQ(m["val_fraction"], 0.1);
  ASSERT_EQ(m["sources"].size(), 1u);
  EXPECT_EQ(m["sources"][0]["path"], (dir_ / "input.txt").string());
  EXPECT_EQ(m["sources"][0]["bytes"], text.size());
  EXPECT_EQ(m["sources"][0]["sha256"], sha256_hex(text));
  EXPECT_FALSE(fs::exists(fs::path(ds_dir) / "tokenizer.model"));

  const TokenDataset ds = TokenDataset::open(ds_dir);
  const DatasetManifest& man = ds.manifest();
  EXPECT_EQ(man.train.bytes + man.val.bytes, static_cast<int64_t>(text.size()));
  EXPECT_EQ(man.train.documents, 1);
  EXPECT_EQ(man.val.documents, 1);
  EXPECT_EQ(man.train.tokens, man.train.bytes + 2);  // bytes plus BOS and EOS
  EXPECT_EQ(man.val.tokens, man.val.bytes + 2);
  EXPECT_NEAR(static_cast<double>(man.val.bytes), 0.1 * static_cast<double>(text.size()), 0.05 * text.size());

  const auto train = ds.load_split("train"), val = ds.load_split("val");
  ASSERT_EQ(static_cast<int64_t>(train.size()), man.train.tokens);
  EXPECT_EQ(train.front(), 256);
  EXPECT_EQ(train.back(), 257);
  EXPECT_EQ(val.front(), 256);
  EXPECT_EQ(val.back(), 257);
  const auto tok = ds.tokenizer();
  const std::string train_text = tok->decode(train), val_text = tok->decode(val);
  EXPECT_EQ(train_text + val_text, text);
  EXPECT_EQ(val_text, text.substr(text.size() - val_text.size()));  // validation is the tail
  EXPECT_EQ(train_text.back(), '\n');                                // cut at a line start

  // uint16 ids: the file is the 24-byte header plus 2 bytes per token.
  EXPECT_EQ(fs::file_size(fs::path(ds_dir) / "train.bin"), 24 + 2 * static_cast<uint64_t>(man.train.tokens));
  const std::string shard = read_file(fs::path(ds_dir) / "train.bin");
  EXPECT_EQ(shard.substr(0, 8), "GATEDTOK");
  EXPECT_EQ(shard[8], 1);   // version
  EXPECT_EQ(shard[12], 2);  // dtype
  EXPECT_THROW(ds.load_split("test"), Error);
}

TEST_F(TokenDatasetTest, Deterministic) {
  const std::string text = sample_text(300, "det");
  const std::string a = prepare_one(text, 0.2, "a"), b = prepare_one(text, 0.2, "b");
  for (const char* name : {"train.bin", "val.bin", "manifest.json"}) {
    EXPECT_EQ(read_file(fs::path(a) / name), read_file(fs::path(b) / name)) << name;
  }
}

TEST_F(TokenDatasetTest, DirectoriesGiveEachFilesTailToValidation) {
  fs::create_directories(dir_ / "corpus" / "sub");
  fs::create_directories(dir_ / "corpus" / "ds");  // the output inside the input: not read
  write_file(dir_ / "corpus" / "ds" / "notes.txt", "not input");
  const std::string t1 = sample_text(50, "first"), t2 = sample_text(80, "second"), t3 = sample_text(30, "third");
  write_file(dir_ / "corpus" / "b.txt", t2);
  write_file(dir_ / "corpus" / "a.txt", t1);
  write_file(dir_ / "corpus" / "sub" / "c.txt", t3);
  write_file(dir_ / "corpus" / "empty.txt", "");
  PrepareOptions o;
  o.tokenizer = "byte";
  o.inputs = {(dir_ / "corpus").string()};
  o.out = (dir_ / "corpus" / "ds").string();
  o.val_fraction = 0.25;
  prepare_dataset(o);
  const TokenDataset ds = TokenDataset::open(o.out);
  EXPECT_EQ(ds.manifest().train.documents, 3);
  EXPECT_EQ(ds.manifest().val.documents, 3);
  EXPECT_EQ(ds.manifest().train.bytes + ds.manifest().val.bytes, static_cast<int64_t>(t1.size() + t2.size() + t3.size()));
  const nlohmann::json m = nlohmann::json::parse(read_file(fs::path(o.out) / "manifest.json"));
  ASSERT_EQ(m["sources"].size(), 4u);  // sorted: a, b, empty, sub/c
  EXPECT_EQ(m["sources"][0]["path"], (dir_ / "corpus" / "a.txt").string());
  EXPECT_EQ(m["sources"][3]["path"], (dir_ / "corpus" / "sub" / "c.txt").string());

  // Documents in file order, each BOS ... EOS; the val documents are the files' tails.
  const auto tok = ds.tokenizer();
  const auto val = ds.load_split("val");
  std::vector<std::string> docs;
  std::vector<int32_t> current;
  for (int32_t id : val) {
    if (id == 256) {
      current.clear();
    } else if (id == 257) {
      docs.push_back(tok->decode(current));
    } else {
      current.push_back(id);
    }
  }
  ASSERT_EQ(docs.size(), 3u);
  const std::string* texts[] = {&t1, &t2, &t3};
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(docs[i].empty());
    EXPECT_EQ(docs[i], texts[i]->substr(texts[i]->size() - docs[i].size())) << i;
  }
}

TEST_F(TokenDatasetTest, SentencePieceDatasetCopiesTheModel) {
  std::string corpus;
  for (int i = 0; i < 40; ++i) corpus += sample_text(10, "sp" + std::to_string(i % 4));
  write_file(dir_ / "corpus.txt", corpus);
  TokenizerTrainOptions t;
  t.inputs = {(dir_ / "corpus.txt").string()};
  t.vocab_size = 320;
  t.out = (dir_ / "my.model").string();
  train_tokenizer(with_threads(t, 2));
  PrepareOptions o;
  o.tokenizer = t.out;
  o.inputs = t.inputs;
  o.out = (dir_ / "ds").string();
  prepare_dataset(o);
  const TokenDataset ds = TokenDataset::open(o.out);
  EXPECT_EQ(ds.manifest().tokenizer, "my.model");
  EXPECT_EQ(ds.manifest().vocab_size, 320);
  EXPECT_EQ(ds.manifest().bos_id, 1);
  EXPECT_EQ(ds.manifest().eos_id, 2);
  EXPECT_EQ(read_file(fs::path(o.out) / "tokenizer.model"), read_file(t.out));
  const auto tok = ds.tokenizer();
  EXPECT_EQ(tok->decode(ds.load_split("train")) + tok->decode(ds.load_split("val")), corpus);
  EXPECT_LT(ds.manifest().train.tokens, ds.manifest().train.bytes / 2);  // BPE compresses

  // Invalid UTF-8 would not survive SentencePiece: refused, naming the file and offset.
  write_file(dir_ / "latin1.txt", "caf\xe9\n");
  o.inputs = {(dir_ / "latin1.txt").string()};
  o.out = (dir_ / "ds2").string();
  const std::string message = error_of([&] { prepare_dataset(o); });
  EXPECT_TRUE(contains(message, "latin1.txt") && contains(message, "byte 3")) << message;
}

TEST_F(TokenDatasetTest, ZeroValFraction) {
  const std::string text = sample_text(20, "all");
  const TokenDataset ds = TokenDataset::open(prepare_one(text, 0.0));
  EXPECT_EQ(ds.manifest().val.tokens, 0);
  EXPECT_EQ(ds.manifest().val.documents, 0);
  EXPECT_EQ(ds.manifest().train.bytes, static_cast<int64_t>(text.size()));
  EXPECT_TRUE(ds.load_split("val").empty());
}

TEST_F(TokenDatasetTest, PrepareErrors) {
  write_file(dir_ / "input.txt", sample_text(20, "x"));
  PrepareOptions o;
  o.tokenizer = "byte";
  o.inputs = {(dir_ / "input.txt").string()};
  o.out = (dir_ / "ds").string();

  PrepareOptions bad = o;
  bad.inputs = {(dir_ / "missing.txt").string()};
  EXPECT_TRUE(contains(error_of([&] { prepare_dataset(bad); }), "missing.txt"));
  write_file(dir_ / "empty.txt", "");
  bad.inputs = {(dir_ / "empty.txt").string()};
  EXPECT_TRUE(contains(error_of([&] { prepare_dataset(bad); }), "empty"));
  bad = o;
  for (double f : {1.0, -0.1, 1.5, std::nan("")}) {
    bad.val_fraction = f;
    EXPECT_TRUE(contains(error_of([&] { prepare_dataset(bad); }), "[0, 1)")) << f;
  }
  bad = o;
  bad.out = (dir_ / "input.txt" / "ds").string();  // under a regular file
  EXPECT_TRUE(contains(error_of([&] { prepare_dataset(bad); }), bad.out));
  bad = o;
  bad.tokenizer = (dir_ / "none.model").string();
  EXPECT_TRUE(contains(error_of([&] { prepare_dataset(bad); }), "none.model"));
  EXPECT_FALSE(fs::exists(o.out));

  // An existing dataset is kept unless forced.
  prepare_dataset(o);
  const std::string before = read_file(fs::path(o.out) / "manifest.json");
  EXPECT_TRUE(contains(error_of([&] { prepare_dataset(o); }), "--force"));
  bad = o;
  bad.inputs = {(dir_ / "missing.txt").string()};
  EXPECT_THROW(prepare_dataset(forced(bad)), Error);  // fails before touching it
  EXPECT_EQ(read_file(fs::path(o.out) / "manifest.json"), before);
  o.val_fraction = 0.5;
  prepare_dataset(forced(o));
  EXPECT_EQ(TokenDataset::open(o.out).manifest().val.documents, 1);
  EXPECT_NE(read_file(fs::path(o.out) / "manifest.json"), before);
  // No temporaries left behind.
  for (const auto& e : fs::directory_iterator(o.out)) {
    EXPECT_FALSE(contains(e.path().filename().string(), ".tmp")) << e.path();
  }
}

// Damage a good dataset in one way and expect open() to name the file at fault.
class DamagedDatasetTest : public TokenDatasetTest {
 protected:
  void expect_open_error(const std::string& file, const std::string& what) {
    const std::string message = error_of([&] { TokenDataset::open(ds_); });
    EXPECT_TRUE(contains(message, (fs::path(ds_) / file).string())) << message;
    EXPECT_TRUE(contains(message, what)) << message;
  }
  void patch(const char* file, size_t offset, const std::string& bytes) {
    std::fstream f(fs::path(ds_) / file, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(static_cast<std::streamoff>(offset));
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  void SetUp() override {
    TokenDatasetTest::SetUp();
    ds_ = prepare_one(sample_text(30, "damage"));
    ASSERT_NO_THROW(TokenDataset::open(ds_));
  }
  std::string ds_;
};

TEST_F(DamagedDatasetTest, TruncatedShard) {
  const fs::path shard = fs::path(ds_) / "train.bin";
  const auto size = fs::file_size(shard);
  fs::resize_file(shard, size - 3);
  expect_open_error("train.bin", "truncated");
  expect_open_error("train.bin", std::to_string(size - 3));
  fs::resize_file(shard, 10);
  expect_open_error("train.bin", "truncated");
}

TEST_F(DamagedDatasetTest, WrongMagic) {
  patch("val.bin", 0, "GATEDTOX");
  expect_open_error("val.bin", "GATEDTOK");
}

TEST_F(DamagedDatasetTest, WrongVersion) {
  patch("train.bin", 8, std::string("\x02\0\0\0", 4));
  expect_open_error("train.bin", "version 2");
}

TEST_F(DamagedDatasetTest, WrongDtype) {
  patch("train.bin", 12, std::string("\x03\0\0\0", 4));
  expect_open_error("train.bin", "dtype 3");
}

TEST_F(DamagedDatasetTest, IdOutsideVocabulary) {
  patch("train.bin", 24 + 2 * 5, std::string("\x02\x01", 2));  // id 258
  expect_open_error("train.bin", "id 258");
}

TEST_F(DamagedDatasetTest, CountDisagreesWithManifest) {
  const fs::path shard = fs::path(ds_) / "val.bin";
  std::string data = read_file(shard);
  data += std::string("\x41\0", 2);
  data[16] = static_cast<char>(data[16] + 1);  // count + 1, size consistent
  write_file(shard, data);
  expect_open_error("val.bin", "manifest.json says");
}

TEST_F(DamagedDatasetTest, MissingOrBrokenManifest) {
  const fs::path manifest = fs::path(ds_) / "manifest.json";
  const std::string good = read_file(manifest);
  fs::remove(manifest);
  expect_open_error("manifest.json", "missing");
  write_file(manifest, "{ not json");
  expect_open_error("manifest.json", "not valid JSON");
  nlohmann::json j = nlohmann::json::parse(good);
  j.erase("vocab_size");
  write_file(manifest, j.dump());
  expect_open_error("manifest.json", "vocab_size");
  j = nlohmann::json::parse(good);
  j["splits"].erase("val");
  write_file(manifest, j.dump());
  expect_open_error("manifest.json", "val");
}

TEST_F(DamagedDatasetTest, MissingShard) {
  fs::remove(fs::path(ds_) / "val.bin");
  expect_open_error("val.bin", "missing");
}

}  // namespace
}  // namespace gatedlm::io
