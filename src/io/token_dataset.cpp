// Dataset preparation (`gatedlm data prepare`) and reading prepared datasets.
//
// Shard format (train.bin, val.bin), all integers little-endian:
//   offset  0  8 bytes  magic "GATEDTOK"
//   offset  8  uint32   format version, 1
//   offset 12  uint32   token dtype: bytes per id, 2 (uint16) or 4 (uint32); uint16 when
//                       the vocabulary has at most 65536 ids
//   offset 16  uint64   token count N
//   offset 24  N ids of that dtype
// The file is exactly 24 + N * dtype bytes. Each document is stored as BOS, its tokens,
// EOS. See docs/data-format.md for the manifest and how the split is made.
#include "io/token_dataset.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_file.h"
#include "core/sha256.h"
#include "io/text_corpus.h"

namespace gatedlm::io {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr char kMagic[8] = {'G', 'A', 'T', 'E', 'D', 'T', 'O', 'K'};
constexpr uint32_t kShardVersion = 1;
constexpr int kManifestVersion = 1;
constexpr size_t kHeaderBytes = 24;
constexpr size_t kEncodePiece = 64 * 1024;  // text per SentencePiece call

void put_le(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((value >> (8 * i)) & 0xFF);
}

uint64_t get_le(const unsigned char* p, int bytes) {
  uint64_t value = 0;
  for (int i = bytes - 1; i >= 0; --i) value = (value << 8) | p[i];
  return value;
}

void write_shard(const std::string& path, const std::vector<uint32_t>& ids, uint32_t dtype) {
  AtomicFile file(path);
  std::string header(kMagic, sizeof kMagic);
  put_le(header, kShardVersion, 4);
  put_le(header, dtype, 4);
  put_le(header, ids.size(), 8);
  file.write(header);
  std::string block;
  constexpr size_t kBlock = 1 << 16;
  for (size_t start = 0; start < ids.size(); start += kBlock) {
    const size_t end = std::min(ids.size(), start + kBlock);
    block.clear();
    block.reserve((end - start) * dtype);
    for (size_t i = start; i < end; ++i) put_le(block, ids[i], static_cast<int>(dtype));
    file.write(block);
  }
  file.commit();
}

struct ShardHeader {
  uint32_t dtype = 0;
  uint64_t count = 0;
};

// Opens a shard and checks its header against its size; the stream is left at the ids.
ShardHeader open_shard(const std::string& path, std::ifstream& in) {
  std::error_code ec;
  if (!fs::exists(path, ec)) fail(path, ": missing token shard");
  const uint64_t size = fs::file_size(path, ec);
  if (ec) fail(path, ": cannot stat (", ec.message(), ")");
  in.open(path, std::ios::binary);
  if (!in) fail(path, ": cannot read (", std::strerror(errno), ")");
  unsigned char header[kHeaderBytes];
  if (size < kHeaderBytes) {
    fail(path, ": truncated: ", size, " bytes, shorter than the ", kHeaderBytes, "-byte shard header");
  }
  in.read(reinterpret_cast<char*>(header), kHeaderBytes);
  if (!in) fail(path, ": cannot read the shard header");
  if (std::memcmp(header, kMagic, sizeof kMagic) != 0) {
    fail(path, ": not a gatedlm token shard (the file does not start with \"GATEDTOK\")");
  }
  const auto version = static_cast<uint32_t>(get_le(header + 8, 4));
  if (version != kShardVersion) {
    fail(path, ": unsupported shard format version ", version, " (this build reads version ", kShardVersion, ")");
  }
  ShardHeader h;
  h.dtype = static_cast<uint32_t>(get_le(header + 12, 4));
  if (h.dtype != 2 && h.dtype != 4) fail(path, ": bad token dtype ", h.dtype, " (2 = uint16 or 4 = uint32)");
  h.count = get_le(header + 16, 8);
  const uint64_t payload = size - kHeaderBytes;
  if (h.count > payload / h.dtype || payload != h.count * h.dtype) {
    if (h.count > payload / h.dtype) {
      fail(path, ": truncated: the header says ", h.count, " tokens of ", h.dtype, " bytes, ", kHeaderBytes,
           " + ", h.count, " * ", h.dtype, " bytes in all, but the file has ", size, " bytes");
    }
    fail(path, ": ", size, " bytes, more than the header's ", h.count, " tokens of ", h.dtype, " bytes account for (",
         kHeaderBytes + h.count * h.dtype, " bytes)");
  }
  return h;
}

// Reads a shard's ids, checking each is below vocab_size; `out` may be null (check only).
void read_shard_ids(const std::string& path, int64_t vocab_size, std::vector<int32_t>* out) {
  std::ifstream in;
  const ShardHeader h = open_shard(path, in);
  if (out) {
    out->clear();
    out->reserve(h.count);
  }
  std::vector<unsigned char> block;
  constexpr uint64_t kBlock = 1 << 18;
  for (uint64_t start = 0; start < h.count; start += kBlock) {
    const uint64_t n = std::min(kBlock, h.count - start);
    block.resize(n * h.dtype);
    in.read(reinterpret_cast<char*>(block.data()), static_cast<std::streamsize>(block.size()));
    if (!in) fail(path, ": read error at token ", start);
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t id = get_le(block.data() + i * h.dtype, static_cast<int>(h.dtype));
      if (id >= static_cast<uint64_t>(vocab_size)) {
        fail(path, ": token ", start + i, " has id ", id, ", not below the vocab_size ", vocab_size,
             " of manifest.json");
      }
      if (out) out->push_back(static_cast<int32_t>(id));
    }
  }
}

// Progress on stderr while tokenising: a line rewritten in place on a terminal, else a
// line per quarter of the work. Quiet for small jobs.
class Progress {
 public:
  explicit Progress(int64_t total) : total_(total) {
    tty_ = ::isatty(STDERR_FILENO) == 1;
    enabled_ = total >= (4 << 20);
  }
  void add(int64_t bytes) {
    done_ += bytes;
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (tty_) {
      if (done_ < total_ && now - last_ < std::chrono::milliseconds(200)) return;
      last_ = now;
      std::fprintf(stderr, "\rtokenising: %.1f / %.1f MB (%d%%)", static_cast<double>(done_) / 1e6,
                   static_cast<double>(total_) / 1e6, percent());
      if (done_ >= total_) std::fputc('\n', stderr);
    } else {
      const int quarter = static_cast<int>(4 * done_ / std::max<int64_t>(total_, 1));
      if (quarter <= reported_) return;
      reported_ = quarter;
      std::fprintf(stderr, "tokenising: %.1f / %.1f MB (%d%%)\n", static_cast<double>(done_) / 1e6,
                   static_cast<double>(total_) / 1e6, percent());
    }
    std::fflush(stderr);
  }

 private:
  int percent() const { return static_cast<int>(100 * done_ / std::max<int64_t>(total_, 1)); }
  int64_t total_, done_ = 0;
  bool tty_ = false, enabled_ = false;
  int reported_ = 0;
  std::chrono::steady_clock::time_point last_{};
};

// Appends BOS, the tokens of `text`, EOS to `ids`; the pieces are encoded in parallel.
void encode_document(const Tokenizer& tokenizer, std::string_view text, std::vector<uint32_t>& ids,
                     Progress& progress) {
  const std::vector<std::string_view> pieces = split_text(text, kEncodePiece);
  std::vector<std::vector<int32_t>> encoded(pieces.size());
  std::string error;
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t i = 0; i < pieces.size(); ++i) {
    try {
      encoded[i] = tokenizer.encode(pieces[i]);
    } catch (const std::exception& e) {
#pragma omp critical(gatedlm_encode_error)
      if (error.empty()) error = e.what();
    }
#pragma omp critical(gatedlm_encode_progress)
    progress.add(static_cast<int64_t>(pieces[i].size()));
  }
  if (!error.empty()) fail(error);
  const int64_t vocab = tokenizer.vocab_size();
  ids.push_back(static_cast<uint32_t>(tokenizer.bos_id()));
  for (const auto& piece : encoded) {
    for (int32_t id : piece) {
      if (id < 0 || id >= vocab) fail(tokenizer.name(), ": produced id ", id, " outside its vocabulary of ", vocab);
      ids.push_back(static_cast<uint32_t>(id));
    }
  }
  ids.push_back(static_cast<uint32_t>(tokenizer.eos_id()));
}

template <typename T>
T manifest_value(const json& j, const char* key, const std::string& path) {
  if (!j.is_object() || !j.contains(key)) fail(path, ": key \"", key, "\" is missing");
  const json& v = j.at(key);
  if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) fail(path, ": key \"", key, "\" must be a string");
  } else if constexpr (std::is_integral_v<T>) {
    if (!v.is_number_integer()) fail(path, ": key \"", key, "\" must be an integer");
  } else {
    if (!v.is_number()) fail(path, ": key \"", key, "\" must be a number");
  }
  return v.get<T>();
}

SplitInfo read_split_info(const json& splits, const char* name, const std::string& path) {
  if (!splits.contains(name) || !splits.at(name).is_object()) fail(path, ": splits.", name, " is missing");
  const json& s = splits.at(name);
  SplitInfo info;
  const std::string where = cat(path, " (splits.", name, ")");
  info.tokens = manifest_value<int64_t>(s, "tokens", where);
  info.bytes = manifest_value<int64_t>(s, "bytes", where);
  info.documents = manifest_value<int64_t>(s, "documents", where);
  if (info.tokens < 0 || info.bytes < 0 || info.documents < 0) fail(where, ": negative sizes");
  return info;
}

json split_json(const SplitInfo& s) {
  return json{{"tokens", s.tokens}, {"bytes", s.bytes}, {"documents", s.documents}};
}

std::string join(const std::string& dir, const char* name) { return (fs::path(dir) / name).string(); }

}  // namespace

TokenDataset TokenDataset::open(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail(dir, ": no such dataset directory");
  const std::string path = join(dir, "manifest.json");
  if (!fs::exists(path, ec)) {
    fail(path, ": missing, so ", dir, " is not a prepared dataset (make one with `gatedlm data prepare`)");
  }
  const json j = read_json_file(path, "dataset manifest");
  if (!j.is_object()) fail(path, ": must hold a JSON object");
  const int version = manifest_value<int>(j, "format_version", path);
  if (version != kManifestVersion) {
    fail(path, ": unsupported format_version ", version, " (this build reads ", kManifestVersion, ")");
  }
  TokenDataset ds;
  ds.dir_ = dir;
  DatasetManifest& m = ds.manifest_;
  m.tokenizer = manifest_value<std::string>(j, "tokenizer", path);
  m.vocab_size = manifest_value<int64_t>(j, "vocab_size", path);
  m.bos_id = manifest_value<int32_t>(j, "bos_id", path);
  m.eos_id = manifest_value<int32_t>(j, "eos_id", path);
  const double val_fraction = manifest_value<double>(j, "val_fraction", path);
  if (!j.contains("sources") || !j.at("sources").is_array()) fail(path, ": key \"sources\" must be a list");
  if (!j.contains("splits") || !j.at("splits").is_object()) fail(path, ": key \"splits\" must be an object");
  m.train = read_split_info(j.at("splits"), "train", path);
  m.val = read_split_info(j.at("splits"), "val", path);
  if (m.tokenizer.empty()) fail(path, ": tokenizer is empty");
  if (m.vocab_size <= 0 || m.vocab_size > (int64_t{1} << 32)) fail(path, ": vocab_size ", m.vocab_size, " is invalid");
  if (m.bos_id < 0 || m.bos_id >= m.vocab_size) fail(path, ": bos_id ", m.bos_id, " is outside the vocabulary");
  if (m.eos_id < 0 || m.eos_id >= m.vocab_size) fail(path, ": eos_id ", m.eos_id, " is outside the vocabulary");
  if (!(val_fraction >= 0 && val_fraction < 1)) fail(path, ": val_fraction ", val_fraction, " is not in [0, 1)");
  for (const auto& [name, info] : {std::pair{"train", &m.train}, std::pair{"val", &m.val}})
    if (info->tokens < 0 || info->documents < 0 || info->bytes < 0 || (info->tokens > 0 && info->bytes == 0))
      fail(path, ": splits.", name, " has ", info->tokens, " tokens from ", info->bytes,
           " bytes of text (bits per byte need the bytes; counts cannot be negative)");
  if (m.tokenizer == "byte" && (m.vocab_size != Tokenizer::load("byte")->vocab_size() ||
                                m.bos_id != Tokenizer::load("byte")->bos_id() ||
                                m.eos_id != Tokenizer::load("byte")->eos_id()))
    fail(path, ": vocab_size ", m.vocab_size, ", bos_id ", m.bos_id, ", eos_id ", m.eos_id,
         " do not match the byte tokenizer (", Tokenizer::load("byte")->vocab_size(), ", ",
         Tokenizer::load("byte")->bos_id(), ", ", Tokenizer::load("byte")->eos_id(), ")");
  if (m.tokenizer != "byte" && !fs::exists(join(dir, "tokenizer.model"), ec)) {
    fail(join(dir, "tokenizer.model"), ": missing (the dataset was made with tokenizer ", m.tokenizer, ")");
  }
  for (const auto& [name, info] : {std::pair{"train.bin", &m.train}, std::pair{"val.bin", &m.val}}) {
    const std::string shard = join(dir, name);
    std::ifstream in;
    const ShardHeader h = open_shard(shard, in);
    if (static_cast<int64_t>(h.count) != info->tokens) {
      fail(shard, ": holds ", h.count, " tokens but manifest.json says ", info->tokens);
    }
    if (h.dtype == 2 && m.vocab_size > 65536) {
      fail(shard, ": uint16 ids cannot hold the vocab_size ", m.vocab_size, " of manifest.json");
    }
    in.close();
    read_shard_ids(shard, m.vocab_size, nullptr);
  }
  return ds;
}

std::vector<int32_t> TokenDataset::load_split(const std::string& split) const {
  if (split != "train" && split != "val") fail("unknown split \"", split, "\" (train or val)");
  std::vector<int32_t> ids;
  read_shard_ids(join(dir_, split == "train" ? "train.bin" : "val.bin"), manifest_.vocab_size, &ids);
  return ids;
}

std::unique_ptr<Tokenizer> TokenDataset::tokenizer() const {
  if (manifest_.tokenizer == "byte") return Tokenizer::load("byte");
  const std::string path = join(dir_, "tokenizer.model");
  std::unique_ptr<Tokenizer> t = Tokenizer::load(path);
  if (t->vocab_size() != manifest_.vocab_size || t->bos_id() != manifest_.bos_id ||
      t->eos_id() != manifest_.eos_id) {
    fail(path, ": vocabulary ", t->vocab_size(), " (BOS ", t->bos_id(), ", EOS ", t->eos_id(),
         ") does not match manifest.json (", manifest_.vocab_size, ", BOS ", manifest_.bos_id, ", EOS ",
         manifest_.eos_id, ")");
  }
  return t;
}


// Checks and creates a dataset's output directory: refuses a file in its place and, unless
// force, a directory that already holds a prepared dataset.
void prepare_output_directory(const std::string& dir, bool force) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) fail(dir, ": exists and is not a directory");
  if (fs::exists(join(dir, "manifest.json"), ec) && !force)
    fail(dir, ": already holds a prepared dataset (manifest.json); pass --force to replace it");
  fs::create_directories(dir, ec);
  if (ec) fail(dir, ": cannot create the output directory (", ec.message(), ")");
  if (::access(dir.c_str(), W_OK | X_OK) != 0) fail(dir, ": output directory is not writable");
}

void prepare_dataset(const PrepareOptions& options) {
  const bool force = options.force;
  const double vf = options.val_fraction;
  if (!(vf >= 0 && vf < 1)) fail("val fraction ", vf, " is not in [0, 1)");
  if (options.out.empty()) fail("no output directory given");
  if (options.inputs.empty()) fail("no input given");
  std::vector<std::string> files = collect_text_files(options.inputs);
  {
    // A dataset directory inside an input directory is not input (its manifest is text).
    std::error_code ec;
    const fs::path out_dir = fs::weakly_canonical(options.out, ec);
    std::erase_if(files, [&](const std::string& file) {
      const fs::path p = fs::weakly_canonical(file, ec);
      return std::mismatch(out_dir.begin(), out_dir.end(), p.begin(), p.end()).first == out_dir.end();
    });
    if (files.empty()) fail("no input files outside the output directory ", options.out);
  }
  std::vector<int64_t> sizes;
  int64_t total = 0;
  for (const std::string& file : files) {
    std::error_code ec;
    sizes.push_back(static_cast<int64_t>(fs::file_size(file, ec)));
    if (ec) fail(file, ": cannot stat (", ec.message(), ")");
    total += sizes.back();
  }
  if (total == 0) fail("the inputs hold no text (", files.size() == 1 ? files[0] : "every file", " is empty)");

  const std::unique_ptr<Tokenizer> tokenizer = Tokenizer::load(options.tokenizer);
  const bool byte = options.tokenizer == "byte";

  // The output directory: checked and created before the (long) tokenisation.
  prepare_output_directory(options.out, force);

  std::vector<uint32_t> train_ids, val_ids;
  SplitInfo train, val;
  json sources = json::array();
  Progress progress(total);
  for (size_t f = 0; f < files.size(); ++f) {
    const std::string& file = files[f];
    const std::string text = read_text_file(file);
    if (text.empty()) {
      std::fprintf(stderr, "gatedlm: %s is empty; it adds no document\n", file.c_str());
    }
    if (!byte) {
      const int64_t bad = find_invalid_utf8(text);
      if (bad >= 0) {
        fail(file, ": not valid UTF-8 at byte ", bad, " (convert it to UTF-8, or use --tokenizer byte)");
      }
    }
    const size_t cut = validation_cut(text, vf);
    const std::string_view all(text);
    const std::string_view head = all.substr(0, cut), tail = all.substr(cut);
    if (!head.empty()) {
      encode_document(*tokenizer, head, train_ids, progress);
      train.bytes += static_cast<int64_t>(head.size());
      ++train.documents;
    }
    if (!tail.empty()) {
      encode_document(*tokenizer, tail, val_ids, progress);
      val.bytes += static_cast<int64_t>(tail.size());
      ++val.documents;
    }
    sources.push_back(source_record(file, text, static_cast<int64_t>(head.size()), static_cast<int64_t>(tail.size())));
  }
  train.tokens = static_cast<int64_t>(train_ids.size());
  val.tokens = static_cast<int64_t>(val_ids.size());

  write_token_dataset(options.out, options.tokenizer, train_ids, val_ids, train, val, sources.dump(), vf, "{}",
                      /*force=*/true);  // the directory was checked above
}

nlohmann::json source_record(const std::string& path, std::string_view text, int64_t train_bytes, int64_t val_bytes) {
  return nlohmann::json{{"path", path},
                        {"bytes", static_cast<int64_t>(text.size())},
                        {"sha256", sha256_hex(text)},
                        {"train_bytes", train_bytes},
                        {"val_bytes", val_bytes}};
}

void write_token_dataset(const std::string& dir, const std::string& tokenizer_spec, const std::vector<uint32_t>& train,
                         const std::vector<uint32_t>& val, const SplitInfo& train_info, const SplitInfo& val_info,
                         const std::string& sources_json, double val_fraction, const std::string& extra_json,
                         bool force) {
  const std::unique_ptr<Tokenizer> tokenizer = Tokenizer::load(tokenizer_spec);
  const bool byte = tokenizer_spec == "byte";
  const uint32_t dtype = tokenizer->vocab_size() <= 65536 ? 2 : 4;
  for (const auto* ids : {&train, &val})
    for (uint32_t id : *ids)
      if (id >= static_cast<uint64_t>(tokenizer->vocab_size()))
        fail(dir, ": token id ", id, " is outside the vocabulary of ", tokenizer->name());
  prepare_output_directory(dir, force);
  // Writing: the old manifest goes first and the new one comes last, so a failure at any
  // point leaves a directory that TokenDataset::open refuses.
  const std::string manifest_path = join(dir, "manifest.json");
  std::error_code ec;
  if (fs::exists(manifest_path, ec)) {
    if (!fs::remove(manifest_path, ec) || ec) fail(manifest_path, ": cannot remove (", ec.message(), ")");
    fsync_directory(dir);
  }
  const std::string model_copy = join(dir, "tokenizer.model");
  std::string tokenizer_name = "byte";
  if (!byte) {
    write_file_atomic(model_copy, read_text_file(tokenizer_spec));
    tokenizer_name = fs::path(tokenizer_spec).filename().string();
  } else if (fs::exists(model_copy, ec)) {
    fs::remove(model_copy, ec);
  }
  write_shard(join(dir, "train.bin"), train, dtype);
  write_shard(join(dir, "val.bin"), val, dtype);
  json manifest = {
      {"format_version", kManifestVersion},
      {"tokenizer", tokenizer_name},
      {"vocab_size", tokenizer->vocab_size()},
      {"bos_id", tokenizer->bos_id()},
      {"eos_id", tokenizer->eos_id()},
      {"token_dtype", dtype == 2 ? "uint16" : "uint32"},
      {"sources", json::parse(sources_json)},
      {"val_fraction", val_fraction},
      {"splits", {{"train", split_json(train_info)}, {"val", split_json(val_info)}}},
  };
  const json extra = json::parse(extra_json);
  for (const auto& [key, value] : extra.items()) manifest[key] = value;
  write_file_atomic(manifest_path, manifest.dump(2) + "\n");
}

}  // namespace gatedlm::io
