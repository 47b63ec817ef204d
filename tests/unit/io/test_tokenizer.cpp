// Tokenizers: the byte tokenizer, SentencePiece BPE training (byte fallback, lossless round
// trips, errors) and the text helpers shared with dataset preparation.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "io/text_corpus.h"
#include "io/tokenizer.h"
#include "io_fixtures.h"
#include "test_files.h"

namespace gatedlm::io {
namespace {

using testing::contains;
using testing::error_of;
using testing::with_threads;
using testing::write_file;

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& tag) {
  const fs::path dir = fs::temp_directory_path() / ("gatedlm_tok_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// About 40 KB of English: the start of TinyShakespeare when the shared data is there,
// else generated sentences.
std::string training_text() {
  std::ifstream in(GATEDLM_SOURCE_DIR "/../shared/data/tinyshakespeare.txt", std::ios::binary);
  std::string text(40000, '\0');
  if (in.read(text.data(), static_cast<std::streamsize>(text.size()))) return text;
  const char* words[] = {"the", "king", "and", "queen", "of", "a", "land", "far", "away", "said", "to", "her",
                         "his", "good", "lord", "my", "heart", "is", "not", "yours", "Thou", "art", "hence"};
  text.clear();
  uint32_t state = 12345;
  while (text.size() < 40000) {
    state = state * 1664525u + 1013904223u;
    text += words[(state >> 16) % (sizeof words / sizeof *words)];
    text += (state >> 8) % 11 == 0 ? ".\n" : " ";
  }
  return text;
}

TEST(ByteTokenizerTest, RoundTripAndIds) {
  const auto t = Tokenizer::load("byte");
  EXPECT_EQ(t->vocab_size(), 258);
  EXPECT_EQ(t->bos_id(), 256);
  EXPECT_EQ(t->eos_id(), 257);
  EXPECT_EQ(t->name(), "byte");
  std::string text = "Hello, wörld! 日本語\n\t";
  for (int b = 0; b < 256; ++b) text += static_cast<char>(b);
  const std::vector<int32_t> ids = t->encode(text);
  ASSERT_EQ(ids.size(), text.size());
  EXPECT_EQ(ids[0], 'H');
  EXPECT_EQ(ids[8], 0xC3);  // ö is C3 B6
  EXPECT_EQ(t->decode(ids), text);
  std::vector<int32_t> wrapped = ids;
  wrapped.insert(wrapped.begin(), 256);
  wrapped.push_back(257);
  EXPECT_EQ(t->decode(wrapped), text);
  EXPECT_THROW(t->decode({65, 258}), Error);
  EXPECT_THROW(t->decode({-1}), Error);
}

TEST(TokenizerLoadTest, ErrorsNameThePath) {
  const fs::path dir = fresh_dir("load");
  const std::string missing = (dir / "nope.model").string();
  EXPECT_TRUE(contains(error_of([&] { Tokenizer::load(missing); }), missing));
  const std::string garbage = (dir / "garbage.model").string();
  write_file(garbage, "this is not a protobuf");
  EXPECT_TRUE(contains(error_of([&] { Tokenizer::load(garbage); }), garbage));
  EXPECT_TRUE(contains(error_of([&] { Tokenizer::load(dir.string()); }), dir.string()));
  fs::remove_all(dir);
}

class SentencePieceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fresh_dir("sp"));
    write_file(*dir_ / "corpus.txt", training_text());
    TokenizerTrainOptions o;
    o.inputs = {(*dir_ / "corpus.txt").string()};
    o.vocab_size = 400;
    o.out = (*dir_ / "sub" / "t.model").string();
    train_tokenizer(with_threads(o, 2));
    tokenizer_ = Tokenizer::load(o.out).release();
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    fs::remove_all(*dir_);
    delete dir_;
  }
  static fs::path* dir_;
  static Tokenizer* tokenizer_;
};
fs::path* SentencePieceTest::dir_ = nullptr;
Tokenizer* SentencePieceTest::tokenizer_ = nullptr;

TEST_F(SentencePieceTest, ModelShape) {
  const Tokenizer& t = *tokenizer_;
  EXPECT_EQ(t.vocab_size(), 400);
  EXPECT_EQ(t.bos_id(), 1);
  EXPECT_EQ(t.eos_id(), 2);
  EXPECT_NE(t.bos_id(), t.eos_id());
  EXPECT_EQ(t.name(), (*dir_ / "sub" / "t.model").string());
  // Only the model is left in the output directory: no temporaries, no .vocab.
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(*dir_ / "sub")) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"t.model"});
}

TEST_F(SentencePieceTest, LosslessRoundTripWithByteFallback) {
  const Tokenizer& t = *tokenizer_;
  const std::string texts[] = {
      "First Citizen:\nBefore we proceed any further, hear me speak.\n",
      "  leading spaces,  double  spaces and trailing \t\n\n",
      "non-ASCII: Grüße, café, naïve — 日本語のテキスト, emoji 🙂, Ω≈ç√",
      "digits 1234567890 and <s> </s> <unk> literally",
      "",
  };
  for (const std::string& text : texts) {
    const std::vector<int32_t> ids = t.encode(text);
    for (int32_t id : ids) {
      EXPECT_GE(id, 0);
      EXPECT_LT(id, t.vocab_size());
      EXPECT_NE(id, t.bos_id());
      EXPECT_NE(id, t.eos_id());
      EXPECT_NE(id, 0) << "unk in the encoding of: " << text;  // byte fallback instead
    }
    EXPECT_EQ(t.decode(ids), text);
  }
  // BPE compresses the English it was trained on.
  const std::string english = training_text().substr(0, 4000);
  EXPECT_LT(t.encode(english).size(), english.size() * 3 / 4);
  // BOS and EOS decode to nothing.
  std::vector<int32_t> ids = t.encode("hello");
  ids.insert(ids.begin(), t.bos_id());
  ids.push_back(t.eos_id());
  EXPECT_EQ(t.decode(ids), "hello");
  EXPECT_THROW(t.decode({400}), Error);
}

TEST_F(SentencePieceTest, PiecewiseEncodingMatchesWhole) {
  // Datasets encode long texts in pieces cut by split_text; pieces must not change ids.
  const Tokenizer& t = *tokenizer_;
  const std::string text = training_text().substr(0, 20000);
  std::vector<int32_t> pieced;
  for (std::string_view piece : split_text(text, 700)) {
    const auto ids = t.encode(piece);
    pieced.insert(pieced.end(), ids.begin(), ids.end());
  }
  EXPECT_EQ(pieced, t.encode(text));
  // One long line: cut before spaces.
  std::string line;
  for (int i = 0; i < 800; ++i) line += "my good lord ";
  pieced.clear();
  for (std::string_view piece : split_text(line, 500)) {
    const auto ids = t.encode(piece);
    pieced.insert(pieced.end(), ids.begin(), ids.end());
  }
  EXPECT_EQ(pieced, t.encode(line));
}

TEST_F(SentencePieceTest, TrainingErrors) {
  TokenizerTrainOptions o;
  o.inputs = {(*dir_ / "corpus.txt").string()};
  o.out = (*dir_ / "bad.model").string();
  o.vocab_size = 100;
  EXPECT_TRUE(contains(error_of([&] { train_tokenizer(with_threads(o, 1)); }), "too small"));
  o.vocab_size = 265;  // above the fixed minimum, below 259 + the text's characters
  const std::string message = error_of([&] { train_tokenizer(with_threads(o, 1)); });
  EXPECT_TRUE(contains(message, "too small for this text")) << message;
  EXPECT_FALSE(fs::exists(o.out));
  o.vocab_size = 400;
  o.inputs = {(*dir_ / "missing.txt").string()};
  EXPECT_TRUE(contains(error_of([&] { train_tokenizer(with_threads(o, 1)); }), "missing.txt"));
  write_file(*dir_ / "empty.txt", "");
  o.inputs = {(*dir_ / "empty.txt").string()};
  EXPECT_TRUE(contains(error_of([&] { train_tokenizer(with_threads(o, 1)); }), "no text"));
  write_file(*dir_ / "tiny.txt", "hello world hello\n");
  o.inputs = {(*dir_ / "tiny.txt").string()};
  o.vocab_size = 8000;
  EXPECT_TRUE(contains(error_of([&] { train_tokenizer(with_threads(o, 1)); }), "too large for this text"));
}

TEST_F(SentencePieceTest, RaisesTheVocabularyToTheTextsCharactersWhenAsked) {
  // The demo's presets: a vocabulary below what the corpus's characters need is raised to
  // that need (and said) instead of refused; one that fits is kept as given.
  TokenizerTrainOptions o;
  o.inputs = {(*dir_ / "corpus.txt").string()};
  o.out = (*dir_ / "raised.model").string();
  o.vocab_size = 265;  // below 259 + the text's characters, as in TrainingErrors
  o.raise_to_characters = true;
  const int64_t trained = train_tokenizer(with_threads(o, 1));
  EXPECT_GT(trained, 265);
  EXPECT_EQ(Tokenizer::load(o.out)->vocab_size(), trained);
  // The need itself is a vocabulary that trains without raising.
  o.raise_to_characters = false;
  o.vocab_size = trained;
  o.out = (*dir_ / "needed.model").string();
  EXPECT_EQ(train_tokenizer(with_threads(o, 1)), trained);
  o.vocab_size = trained - 1;
  EXPECT_TRUE(contains(error_of([&] { train_tokenizer(with_threads(o, 1)); }), "too small for this text"));
  o.vocab_size = trained + 40;
  o.raise_to_characters = true;
  EXPECT_EQ(train_tokenizer(with_threads(o, 1)), trained + 40);
}

TEST_F(SentencePieceTest, TrainsOnDirectoriesAndLongLines) {
  // A directory tree (hidden entries and binary files skipped) whose text is a single
  // 100 KB line: the trainer sees it cut into sentences rather than dropping it.
  const fs::path tree = *dir_ / "tree";
  fs::create_directories(tree / "b" / ".git");
  std::string line;
  for (int i = 0; line.size() < 100000; ++i) line += (i % 3 ? "lorem ipsum " : "dolor sit amet ");
  write_file(tree / "b" / "long.txt", line);
  write_file(tree / "a.txt", "zebra zebra zebra crossing\n");
  write_file(tree / "b" / ".git" / "config", std::string(1000, '#'));
  write_file(tree / "blob.bin", std::string("\0\1\2", 3));
  EXPECT_EQ(collect_text_files({tree.string()}),
            (std::vector<std::string>{(tree / "a.txt").string(), (tree / "b" / "long.txt").string()}));
  TokenizerTrainOptions o;
  o.inputs = {tree.string()};
  o.vocab_size = 300;
  o.out = (*dir_ / "tree.model").string();
  train_tokenizer(with_threads(o, 1));
  const auto t = Tokenizer::load(o.out);
  EXPECT_EQ(t->vocab_size(), 300);
  EXPECT_LE(t->encode("lorem ipsum dolor sit amet").size(), 8u);  // words of the long line were learnt
  EXPECT_EQ(t->decode(t->encode(line)), line);
}

TEST(TextCorpusTest, SplitText) {
  const std::string text = "one two three\nfour five six seven\n" + std::string(50, 'x') + " 日本語日本語日本語";
  for (size_t max : {4, 5, 8, 13, 20, 64}) {
    const auto pieces = split_text(text, max);
    std::string joined;
    for (std::string_view p : pieces) {
      joined += p;
      EXPECT_LE(p.size(), max);
      EXPECT_EQ(find_invalid_utf8(p), -1) << "piece cut inside a character: " << p;
    }
    EXPECT_EQ(joined, text);
  }
  const auto pieces = split_text("aaa bbb\nccc ddd", 10);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0], "aaa bbb\n");  // at the newline
  const auto spaced = split_text("aaa bbb ccc ddd", 10);
  EXPECT_EQ(spaced[0], "aaa bbb");  // before a space
  EXPECT_EQ(spaced[1], " ccc ddd");
}

TEST(TextCorpusTest, Utf8) {
  EXPECT_EQ(find_invalid_utf8("plain ascii"), -1);
  EXPECT_EQ(find_invalid_utf8("ü 日本 🙂"), -1);
  EXPECT_EQ(find_invalid_utf8("ab\xff"), 2);
  EXPECT_EQ(find_invalid_utf8("a\xc3"), 1);          // truncated
  EXPECT_EQ(find_invalid_utf8("a\xc0\xaf"), 1);      // overlong
  EXPECT_EQ(find_invalid_utf8("a\xed\xa0\x80"), 1);  // surrogate
  EXPECT_EQ(find_invalid_utf8("\xf4\x90\x80\x80"), 0);
  const std::string s = "a日b";  // 'a', E6 97 A5, 'b'
  EXPECT_EQ(utf8_boundary_at_or_before(s, 2), 1u);
  EXPECT_EQ(utf8_boundary_at_or_before(s, 3), 1u);
  EXPECT_EQ(utf8_boundary_at_or_before(s, 4), 4u);
  EXPECT_EQ(utf8_boundary_at_or_before(s, 99), 5u);
}

TEST(TextCorpusTest, ValidationCut) {
  std::string text;
  for (int i = 0; i < 100; ++i) text += "line " + std::to_string(i) + " of the text\n";
  EXPECT_EQ(validation_cut(text, 0.0), text.size());
  for (double f : {0.05, 0.1, 0.3}) {
    const size_t cut = validation_cut(text, f);
    EXPECT_EQ(text[cut - 1], '\n') << f;  // at a line start
    const double nominal = static_cast<double>(text.size()) * (1 - f);
    EXPECT_NEAR(static_cast<double>(cut), nominal, 0.5 * f * static_cast<double>(text.size()) + 1) << f;
  }
  // Without newlines: a character boundary at the nominal place.
  const std::string cjk = "日本語日本語日本語日本語";  // 36 bytes
  const size_t cut = validation_cut(cjk, 0.1);        // nominal 32
  EXPECT_EQ(cut, 30u);
  EXPECT_EQ(validation_cut("abc", 0.1), 3u);  // a tail that rounds to nothing
}

}  // namespace
}  // namespace gatedlm::io
