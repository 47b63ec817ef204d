#pragma once
// A GGUF file (version 2 or 3, little-endian), read as ggml's docs/gguf.md specifies it:
// "GGUF", version, tensor count, key/value count; the typed key/value metadata; the tensor
// infos (name, dims innermost first, ggml type, offset into the data section); the data
// section at the next multiple of general.alignment (32 when absent), every tensor offset a
// multiple of it.
//
// The input is untrusted: every count and length is bounded by the bytes left in the file
// before anything is allocated for it, and the file is refused, naming it and the key or
// tensor, for a bad magic or version, a truncation, a duplicate key or tensor name, a
// nested array, an unknown value or tensor type, a dims product that overflows, a row that
// is not a whole number of blocks, an offset that is misaligned, or data that lies outside
// the file or overlaps another tensor's. The metadata is read whole when the file is
// opened; tensor data only when asked for.
#include <cstdint>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace gatedlm::io {

// Any ggml tensor type id by its name: "F32", "Q4_K", ...; "type <id>" for an id ggml does
// not define (kernels/element_types.h holds ggml's types).
std::string describe_ggml_type(uint32_t type);
// Whether GgufReader::read_f32 converts this type (its row of kernels/element_types.h has
// a conversion to fp32: kernels::element_names_readable()).
bool readable_as_f32(uint32_t type);

// One metadata value: a scalar or an array of scalars (GGUF value type ids: 0 u8, 1 i8, 2
// u16, 3 i16, 4 u32, 5 i32, 6 f32, 7 bool, 8 string, 9 array, 10 u64, 11 i64, 12 f64).
struct GgufValue {
  uint32_t type = 0;       // the scalar's type, or 9 (array)
  uint32_t elem_type = 0;  // an array's element type
  // The values: integers and bools in ints (u64 above INT64_MAX clamped to INT64_MAX),
  // floats in floats, strings in strings; one element for a scalar.
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;
  bool is_array() const { return type == 9; }
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> shape;  // outermost first (GGUF stores innermost first)
  uint32_t type = 0;
  uint64_t offset = 0;  // from the start of the file
  uint64_t bytes = 0;
  int64_t numel = 1;
};

class GgufReader {
 public:
  explicit GgufReader(const std::string& path);  // reads and checks everything but the data

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  const std::map<std::string, GgufValue>& metadata() const { return kv_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }  // in file order

  bool has(const std::string& key) const { return kv_.count(key) > 0; }
  // Typed access; each throws naming the file and key when it is absent or of another type.
  // get_int accepts any integer type and checks the value against [lo, hi].
  int64_t get_int(const std::string& key, int64_t lo, int64_t hi) const;
  double get_float(const std::string& key) const;  // f32 or f64
  bool get_bool(const std::string& key) const;
  const std::string& get_string(const std::string& key) const;
  const std::vector<std::string>& get_strings(const std::string& key) const;  // array of strings
  const std::vector<int64_t>& get_ints(const std::string& key) const;         // array of integers
  const std::vector<int64_t>& get_bools(const std::string& key) const;        // array of bools, as 0 / 1

  const GgufTensorInfo* find_tensor(const std::string& name) const;  // nullptr when absent
  // The tensor's values as F32 (the other readable types converted); n must be its numel.
  // Throws naming the tensor and its type for any other type.
  void read_f32(const GgufTensorInfo& t, float* out, int64_t n);
  // Bytes [from, from + n) of the tensor's data as stored (its blocks); throws naming the
  // tensor when the range is not inside it.
  void read_bytes(const GgufTensorInfo& t, uint64_t from, void* out, uint64_t n);

 private:
  std::string path_;
  std::ifstream in_;
  uint64_t file_size_ = 0;
  uint32_t version_ = 0;
  std::map<std::string, GgufValue> kv_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;

  const GgufValue& value(const std::string& key) const;
  void place_data(uint64_t infos_end);
};

}  // namespace gatedlm::io
