// The byte tokenizer, SentencePiece models, and SentencePiece BPE training.
#include "io/tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <thread>
#include <unordered_map>

#include "core/atomic_file.h"
#include "core/error.h"
#include "io/text_corpus.h"

namespace gatedlm::io {
namespace fs = std::filesystem;

namespace {

// ids 0..255 are the bytes themselves; 256 is BOS, 257 EOS.
class ByteTokenizer final : public Tokenizer {
 public:
  static constexpr int32_t kBos = 256, kEos = 257;
  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> ids(text.size());
    std::transform(text.begin(), text.end(), ids.begin(),
                   [](char c) { return static_cast<int32_t>(static_cast<unsigned char>(c)); });
    return ids;
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string text;
    text.reserve(ids.size());
    for (int32_t id : ids) {
      if (id == kBos || id == kEos) continue;
      if (id < 0 || id > 255) fail("byte tokenizer: cannot decode id ", id, " (ids are 0..257)");
      text += static_cast<char>(static_cast<unsigned char>(id));
    }
    return text;
  }
  int64_t vocab_size() const override { return 258; }
  int32_t bos_id() const override { return kBos; }
  int32_t eos_id() const override { return kEos; }
  std::string name() const override { return "byte"; }
};

class SentencePieceTokenizer final : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(const std::string& path) : path_(path) {
    std::error_code ec;
    if (!fs::exists(path, ec)) fail(path, ": no such tokenizer model (give a SentencePiece .model file or \"byte\")");
    if (!fs::is_regular_file(path, ec)) fail(path, ": not a file (give a SentencePiece .model file or \"byte\")");
    const auto status = processor_.Load(path);
    if (!status.ok()) fail(path, ": not a valid SentencePiece model (", status.message(), ")");
    if (processor_.bos_id() < 0 || processor_.eos_id() < 0) {
      fail(path, ": the SentencePiece model has no ", processor_.bos_id() < 0 ? "BOS" : "EOS",
           " piece (train it with bos_id and eos_id set, e.g. with `gatedlm tokenizer train`)");
    }
  }
  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int> ids;
    const auto status = processor_.Encode(text, &ids);
    if (!status.ok()) fail(path_, ": encoding failed (", status.message(), ")");
    return std::vector<int32_t>(ids.begin(), ids.end());
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    const int size = processor_.GetPieceSize();
    for (int32_t id : ids) {
      if (id < 0 || id >= size) fail(path_, ": cannot decode id ", id, " (vocabulary size ", size, ")");
    }
    std::string text;
    const auto status = processor_.Decode(std::vector<int>(ids.begin(), ids.end()), &text);
    if (!status.ok()) fail(path_, ": decoding failed (", status.message(), ")");
    return text;
  }
  int64_t vocab_size() const override { return processor_.GetPieceSize(); }
  int32_t bos_id() const override { return processor_.bos_id(); }
  int32_t eos_id() const override { return processor_.eos_id(); }
  std::string name() const override { return path_; }

 private:
  std::string path_;
  sentencepiece::SentencePieceProcessor processor_;
};

// Training sentences: the lines of each file in turn, empty lines skipped, lines longer
// than kMaxSentence cut (before a space where there is one) so SentencePiece, which
// drops sentences above its max_sentence_length, sees all the text.
class LineIterator final : public sentencepiece::SentenceIterator {
 public:
  static constexpr size_t kMaxSentence = 8192;
  explicit LineIterator(std::vector<std::string> files) : files_(std::move(files)) { advance(); }
  bool done() const override { return done_; }
  void Next() override { advance(); }
  const std::string& value() const override { return current_; }
  sentencepiece::util::Status status() const override {
    if (error_.empty()) return {};
    return sentencepiece::util::Status(sentencepiece::util::StatusCode::kInternal, error_);
  }
  const std::string& error() const { return error_; }
  int64_t bytes() const { return bytes_; }

 private:
  void advance() {
    while (next_piece_ >= pieces_.size()) {
      if (next_file_ >= files_.size()) {
        done_ = true;
        return;
      }
      try {
        text_ = read_text_file(files_[next_file_++]);
      } catch (const Error& e) {
        error_ = e.what();
        done_ = true;
        return;
      }
      bytes_ += static_cast<int64_t>(text_.size());
      pieces_.clear();
      next_piece_ = 0;
      std::string_view rest = text_;
      while (!rest.empty()) {
        const size_t end = rest.find('\n');
        std::string_view line = rest.substr(0, end);
        rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
        if (line.empty()) continue;
        for (std::string_view piece : split_text(line, kMaxSentence)) pieces_.push_back(piece);
      }
    }
    current_.assign(pieces_[next_piece_++]);
  }

  std::vector<std::string> files_;
  size_t next_file_ = 0;
  std::string text_;
  std::vector<std::string_view> pieces_;
  size_t next_piece_ = 0;
  std::string current_, error_;
  int64_t bytes_ = 0;
  bool done_ = false;
};

}  // namespace

std::unique_ptr<Tokenizer> byte_tokenizer() { return std::make_unique<ByteTokenizer>(); }

std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& path) {
  return std::make_unique<SentencePieceTokenizer>(path);
}


namespace {

// Lossless settings: no normalisation, no whitespace folding, no dummy prefix, so
// decode(encode(text)) == text for any valid UTF-8; characters outside the vocabulary
// fall back to their UTF-8 bytes.
std::unordered_map<std::string, std::string> sentencepiece_arguments(int64_t vocab_size, int threads) {
  return {
      {"model_type", "bpe"},
      {"vocab_size", std::to_string(vocab_size)},
      {"byte_fallback", "true"},
      {"unk_id", "0"},
      {"bos_id", "1"},
      {"eos_id", "2"},
      {"pad_id", "-1"},
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"add_dummy_prefix", "false"},
      {"split_digits", "true"},
      {"max_sentence_length", std::to_string(2 * LineIterator::kMaxSentence)},
      // A sample of at most 2 M lines (a reservoir over all of them) keeps training on a
      // large corpus to seconds; smaller corpora are used whole.
      {"input_sentence_size", "2000000"},
      {"shuffle_input_sentence", "true"},
      {"num_threads", std::to_string(threads)},
      {"minloglevel", "1"},
  };
}

// One SentencePiece training run into `model`. Returns 0 when it trained; the vocabulary the
// text's characters need when `vocab_size` is below it (SentencePiece's required_chars plus the
// reserved ids); fails with a message naming the cause otherwise.
int64_t run_sentencepiece(const std::vector<std::string>& files, int64_t vocab_size, int threads, std::string& model) {
  sentencepiece::SetRandomGeneratorSeed(20250611);
  LineIterator sentences(files);
  const auto status =
      sentencepiece::SentencePieceTrainer::Train(sentencepiece_arguments(vocab_size, threads), &sentences, &model);
  if (!sentences.error().empty()) fail(sentences.error());
  if (status.ok()) return 0;
  const std::string message = status.message();
  std::smatch m;
  if (message.find("smaller than required_chars") != std::string::npos &&
      std::regex_search(message, m, std::regex(R"((\d+) vs (\d+))")))
    return std::stoll(m[2].str());
  if (message.find("Vocabulary size too high") != std::string::npos &&
      std::regex_search(message, m, std::regex(R"(<= (\d+))"))) {
    fail("vocab size ", vocab_size, " is too large for this text: BPE finds only ", m[1].str(),
         " pieces in it; give --vocab-size of at most ", m[1].str(), ", or train on more text");
  }
  fail("tokenizer training failed: ", message);
}

}  // namespace

int64_t train_tokenizer(const TokenizerTrainOptions& options) {
  int threads = options.threads;
  if (options.out.empty()) fail("tokenizer training: no output file given");
  if (options.inputs.empty()) fail("tokenizer training: no input given");
  if (options.vocab_size < kMinTrainedVocab) {
    fail("vocab size ", options.vocab_size, " is too small: ", kMinTrainedVocab - 1,
         " ids are reserved (unk, BOS, EOS and 256 byte-fallback pieces), so it must be at least ",
         kMinTrainedVocab, " and in practice a few hundred more, one per character of the text plus the merges");
  }
  const std::vector<std::string> files = collect_text_files(options.inputs);
  int64_t total = 0;
  for (const std::string& file : files) {
    std::error_code ec;
    total += static_cast<int64_t>(fs::file_size(file, ec));
  }
  if (total == 0) fail("tokenizer training: the inputs hold no text");
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  const fs::path out(options.out);
  if (out.has_parent_path()) {
    std::error_code ec;
    fs::create_directories(out.parent_path(), ec);
    if (ec) fail(out.parent_path().string(), ": cannot create directory (", ec.message(), ")");
  }

  int64_t vocab_size = options.vocab_size;
  std::string model;
  int64_t needed = run_sentencepiece(files, vocab_size, threads, model);
  if (needed > 0 && options.raise_to_characters) {
    vocab_size = needed;
    needed = run_sentencepiece(files, vocab_size, threads, model);
  }
  if (needed > 0) {
    fail("vocab size ", vocab_size, " is too small for this text: the ids reserved for unk, BOS, EOS and ",
         "the 256 byte-fallback pieces plus one per distinct character come to ", needed,
         "; give --vocab-size of at least ", needed, " (more to leave room for merges)");
  }
  write_file_atomic(options.out, model);
  return vocab_size;
}

}  // namespace gatedlm::io
