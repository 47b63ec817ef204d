#pragma once
// A prepared dataset directory (written by `gatedlm data prepare`):
//   manifest.json       tokenizer, vocab_size, bos/eos ids, sources with sha256, split sizes
//   tokenizer.model     a copy of the SentencePiece model (absent for "byte")
//   train.bin, val.bin  token shards: fixed header (magic, version, token dtype, count) + ids
// Each document is stored as BOS, its tokens, EOS.
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string_view>
#include <string>
#include <vector>

#include "io/tokenizer.h"

namespace gatedlm::io {

struct SplitInfo {
  int64_t tokens = 0;  // ids in the shard, BOS/EOS included
  int64_t bytes = 0;   // UTF-8 bytes of source text behind them (for bits per byte)
  int64_t documents = 0;
};

struct DatasetManifest {
  std::string tokenizer;  // "byte" or the tokenizer model's file name
  int64_t vocab_size = 0;
  int32_t bos_id = -1, eos_id = -1;
  SplitInfo train, val;
};

class TokenDataset {
 public:
  // Validates the manifest and both shard headers against their file sizes; every
  // error names the file and what is wrong.
  static TokenDataset open(const std::string& dir);
  const DatasetManifest& manifest() const { return manifest_; }
  const std::string& dir() const { return dir_; }
  // All ids of a split ("train" or "val"), in file order.
  std::vector<int32_t> load_split(const std::string& split) const;
  // The tokenizer the data was made with (the copy inside dir, or byte).
  std::unique_ptr<Tokenizer> tokenizer() const;

 private:
  std::string dir_;
  DatasetManifest manifest_;
};

struct PrepareOptions {
  std::string tokenizer;            // "byte" or a .model path
  std::vector<std::string> inputs;  // files or directories
  std::string out;                  // dataset directory
  double val_fraction = 0.1;
  bool force = false;  // replace a dataset already in `out` (otherwise an error)
};
void prepare_dataset(const PrepareOptions& options);

// Writes a dataset directory from ids already laid out as BOS..EOS documents (used by
// `gatedlm data synth`): train.bin, val.bin, the tokenizer copy (tokenizer_spec "byte" or
// a .model path) and manifest.json with `sources_json` (a JSON list) and the keys of
// `extra_json` (a JSON object) added, in prepare_dataset's order (manifest removed first,
// written last; an existing one is replaced only with force).
// The manifest record of one input file split by position: {path, bytes, sha256,
// train_bytes, val_bytes}.
nlohmann::json source_record(const std::string& path, std::string_view text, int64_t train_bytes, int64_t val_bytes);

void write_token_dataset(const std::string& dir, const std::string& tokenizer_spec, const std::vector<uint32_t>& train,
                         const std::vector<uint32_t>& val, const SplitInfo& train_info, const SplitInfo& val_info,
                         const std::string& sources_json, double val_fraction, const std::string& extra_json,
                         bool force);

}  // namespace gatedlm::io
