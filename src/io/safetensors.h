#pragma once
// The safetensors format: an 8-byte little-endian header length N, N bytes of JSON
// {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then
// the tensors' bytes; offsets count from the end of the header.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/atomic_file.h"

namespace gatedlm::io {

struct TensorEntry {
  std::string dtype;  // "F32", "BF16", "I32", ...
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte offsets in the data section
  int64_t numel() const;
};

class SafetensorsReader {
 public:
  // Parses and checks the header against the file size; throws naming the file.
  explicit SafetensorsReader(std::string path);
  const std::map<std::string, TensorEntry>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  const TensorEntry& entry(const std::string& name) const;
  // Reads an F32 tensor into out (resized). Throws if the dtype is not F32.
  void read_f32(const std::string& name, std::vector<float>& out) const;
  void read_f32(const std::string& name, float* out, int64_t numel) const;
  // Reads a tensor's bytes as stored (any dtype, checked to be `dtype`) into out, which
  // holds `bytes`, the tensor's size (checked).
  void read_bytes(const std::string& name, const std::string& dtype, void* out, uint64_t bytes) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  uint64_t data_start_ = 0;
  std::map<std::string, TensorEntry> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Checks a header's JSON against the format's rules (no duplicate keys, entries with
// exactly dtype/shape/data_offsets, __metadata__ string to string, tensors contiguous from
// byte 0 of a data section of data_size bytes with nothing after) and fills the maps.
void parse_safetensors_header(std::string_view header, uint64_t data_size, const std::string& path,
                              std::map<std::string, TensorEntry>& tensors,
                              std::map<std::string, std::string>& metadata);

struct TensorRef {
  std::string name;
  std::vector<int64_t> shape;
  const float* data;
};

// One tensor of a header being written: its bytes follow the previous tensor's.
struct HeaderEntry {
  std::string name, dtype;  // dtype as the format spells it: "F32", "BF16", "F16"
  std::vector<int64_t> shape;
  uint64_t bytes;
};

// Writes the 8-byte header length and the JSON header (padded so the data stays 8-byte
// aligned) of these tensors, contiguous in the order given; the caller writes the data.
// A name given twice is refused, naming the file.
void write_safetensors_header(AtomicFile& file, const std::string& path, const std::vector<HeaderEntry>& entries,
                              const std::map<std::string, std::string>& metadata);

// Writes F32 tensors atomically, in the order given.
void write_safetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace gatedlm::io
