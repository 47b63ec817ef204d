#pragma once
// Tokenizers: the built-in byte tokenizer ("byte": ids 0..255 are bytes, 256 = BOS,
// 257 = EOS, vocabulary 258), SentencePiece BPE models (.model files) and Hugging Face
// byte-level BPE tokenizer.json files (io/tokenizer_json.h; BOS = EOS = <|endoftext|>).
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace gatedlm::io {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Text to ids, without BOS/EOS (callers add them where a sequence starts or ends).
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual int32_t bos_id() const = 0;
  virtual int32_t eos_id() const = 0;
  // "byte", or the model file's name as given.
  virtual std::string name() const = 0;

  // spec is "byte", a path to a SentencePiece .model or to a tokenizer.json; throws naming the
  // path. Defined in io/tokenizer_spec.cpp, beside the kinds it chooses between.
  static std::unique_ptr<Tokenizer> load(const std::string& spec);
};

// The kinds of this file: the byte tokenizer, and a SentencePiece model (throws naming the
// path). A Hugging Face tokenizer.json: io/tokenizer_json.h.
std::unique_ptr<Tokenizer> byte_tokenizer();
std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& path);

struct TokenizerTrainOptions {
  std::vector<std::string> inputs;  // files or directories (read recursively, sorted)
  int64_t vocab_size = 8192;
  std::string out;  // the .model file to write (atomically)
  int threads = 0;  // <= 0: every core
  // A vocab_size below what the text's characters need (the reserved ids plus one per
  // character SentencePiece keeps) is raised to that need instead of refused: for a
  // preset's vocabulary that must fit whatever corpus it is given (the demo's).
  bool raise_to_characters = false;
};

// Smallest vocabulary train_tokenizer accepts: unk, BOS, EOS, the 256 byte-fallback
// pieces and at least one more (the text's characters need more still).
inline constexpr int64_t kMinTrainedVocab = 260;
// Trains a SentencePiece BPE model with byte fallback and BOS/EOS ids; returns its
// vocabulary size (options.vocab_size, or the need it was raised to).
int64_t train_tokenizer(const TokenizerTrainOptions& options);

}  // namespace gatedlm::io
