#include "io/gguf_reader.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "io/gguf_format.h"
#include "kernels/element_types.h"

namespace gatedlm::io {

namespace {

constexpr uint64_t kMaxAlignment = uint64_t{1} << 30;
constexpr uint32_t kMaxDims = 4;  // ggml's GGML_MAX_DIMS

// Bytes of one value of GGUF metadata type t (strings: their length field, the least
// they take); 0 for an unknown type.
uint64_t value_min_bytes(uint32_t t) {
  static constexpr uint64_t kWidth[] = {1, 1, 2, 2, 4, 4, 4, 1, 8, 0, 8, 8, 8};
  return t < std::size(kWidth) ? kWidth[t] : 0;
}

// Little-endian reads from the file, each checked against the bytes left before anything
// is read or allocated.
class Cursor {
 public:
  Cursor(std::ifstream& in, uint64_t size, const std::string& path) : in_(in), size_(size), path_(path) {}
  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }

  void need(uint64_t n, const std::string& what) const {
    if (n > left())
      fail(path_, ": truncated: ", what, " needs ", n, " bytes at offset ", pos_, ", the file has ", left(), " left");
  }
  template <typename T>
  T get(const std::string& what) {
    need(sizeof(T), what);
    T v;
    raw(&v, sizeof(T), what);
    return v;
  }
  std::string str(const std::string& what) {
    const uint64_t n = get<uint64_t>(what + " (length)");
    need(n, what);
    std::string s(static_cast<size_t>(n), '\0');
    raw(s.data(), s.size(), what);
    return s;
  }

 private:
  void raw(void* out, size_t n, const std::string& what) {
    in_.read(static_cast<char*>(out), static_cast<std::streamsize>(n));
    if (!in_) fail(path_, ": read error in ", what, " at offset ", pos_);
    pos_ += n;
  }
  std::ifstream& in_;
  uint64_t size_, pos_ = 0;
  const std::string& path_;
};

// One scalar of type t appended to v.
void read_scalar(Cursor& c, uint32_t t, GgufValue& v, const std::string& what) {
  switch (t) {
    case 0: v.ints.push_back(c.get<uint8_t>(what)); return;
    case 1: v.ints.push_back(c.get<int8_t>(what)); return;
    case 2: v.ints.push_back(c.get<uint16_t>(what)); return;
    case 3: v.ints.push_back(c.get<int16_t>(what)); return;
    case 4: v.ints.push_back(c.get<uint32_t>(what)); return;
    case 5: v.ints.push_back(c.get<int32_t>(what)); return;
    case 6: v.floats.push_back(c.get<float>(what)); return;
    case 7: v.ints.push_back(c.get<uint8_t>(what)); return;
    case 8: v.strings.push_back(c.str(what)); return;
    case 10: {
      const uint64_t u = c.get<uint64_t>(what);
      v.ints.push_back(u > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(u));
      return;
    }
    case 11: v.ints.push_back(c.get<int64_t>(what)); return;
    case 12: v.floats.push_back(c.get<double>(what)); return;
    default: fail("internal error: GGUF value type ", t);
  }
}

GgufValue read_value(Cursor& c, const std::string& path, const std::string& key) {
  const std::string what = "key " + key;
  GgufValue v;
  v.type = c.get<uint32_t>(what + " (type)");
  uint32_t t = v.type;
  uint64_t count = 1;
  if (v.type == kGgufArray) {
    v.elem_type = t = c.get<uint32_t>(what + " (array type)");
    if (t == kGgufArray) fail(path, ": key ", key, ": arrays of arrays are not supported");
    count = c.get<uint64_t>(what + " (array length)");
  }
  const uint64_t width = value_min_bytes(t);
  if (width == 0) fail(path, ": key ", key, ": unknown value type ", t);
  if (count > c.left() / width)
    fail(path, ": key ", key, ": an array of ", count, " values cannot fit in the ", c.left(), " bytes left");
  if (t == kGgufString) v.strings.reserve(static_cast<size_t>(count));
  else if (t == 6 || t == 12) v.floats.reserve(static_cast<size_t>(count));
  else v.ints.reserve(static_cast<size_t>(count));
  for (uint64_t i = 0; i < count; ++i) read_scalar(c, t, v, what);
  return v;
}

// numel and bytes of a tensor from its dims (innermost first) and type; the file's name
// for the tensor in every message.
void size_tensor(GgufTensorInfo& t, const std::vector<uint64_t>& dims, const std::string& where) {
  // ggml's type traits (kernels/element_types.h; ids ggml removed are unknown here too).
  const kernels::ElementTraits* traits = kernels::find_element_type(t.type);
  if (!traits) fail(where, ": unknown ggml type ", t.type);
  const auto block = static_cast<uint64_t>(traits->block_values), bytes = static_cast<uint64_t>(traits->block_bytes);
  uint64_t numel = 1;
  for (uint64_t d : dims)
    if (d > static_cast<uint64_t>(INT64_MAX) || (d != 0 && numel > static_cast<uint64_t>(INT64_MAX) / d))
      fail(where, ": its dims overflow 64 bits");
    else
      numel *= d;
  if (dims[0] % block != 0)
    fail(where, ": a ", traits->ggml_name, " row holds whole blocks of ", block, " values; its row has ", dims[0]);
  if (numel / block > UINT64_MAX / bytes) fail(where, ": its size overflows 64 bits");
  t.numel = static_cast<int64_t>(numel);
  t.bytes = numel / block * bytes;
  for (auto it = dims.rbegin(); it != dims.rend(); ++it) t.shape.push_back(static_cast<int64_t>(*it));
}

GgufTensorInfo read_tensor_info(Cursor& c, const std::string& path, uint64_t index) {
  const std::string what = cat("tensor info ", index);
  GgufTensorInfo t;
  t.name = c.str(what + " (name)");
  const std::string where = cat(path, ": tensor ", t.name);
  const uint32_t n_dims = c.get<uint32_t>(what + " (n_dims)");
  if (n_dims < 1 || n_dims > kMaxDims) fail(where, ": ", n_dims, " dims (1 to ", kMaxDims, ")");
  std::vector<uint64_t> dims(n_dims);
  for (uint64_t& d : dims) d = c.get<uint64_t>(what + " (dims)");
  t.type = c.get<uint32_t>(what + " (type)");
  t.offset = c.get<uint64_t>(what + " (offset)");
  size_tensor(t, dims, where);
  return t;
}

}  // namespace

std::string describe_ggml_type(uint32_t type) {
  const kernels::ElementTraits* t = kernels::find_element_type(type);
  return t ? t->ggml_name : cat("type ", type);
}

bool readable_as_f32(uint32_t type) {
  const kernels::ElementTraits* t = kernels::find_element_type(type);
  return t && t->to_f32;
}

GgufReader::GgufReader(const std::string& path) : path_(path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) fail(path, ": not a regular file");
  file_size_ = std::filesystem::file_size(path, ec);
  if (ec) fail(path, ": cannot read its size (", ec.message(), ")");
  in_.open(path, std::ios::binary);
  if (!in_) fail(path, ": cannot open");
  Cursor c(in_, file_size_, path_);
  const uint32_t magic = c.get<uint32_t>("the magic");
  if (magic != kGgufMagic) fail(path, ": not a GGUF file (the first 4 bytes are not \"GGUF\")");
  version_ = c.get<uint32_t>("the version");
  if (version_ != 2 && version_ != 3) fail(path, ": GGUF version ", version_, " is not supported (2 or 3, little-endian)");
  const uint64_t n_tensors = c.get<uint64_t>("the tensor count"), n_kv = c.get<uint64_t>("the key/value count");
  // The least a key/value (8 + 4 + 1 bytes) and a tensor info (8 + 4 + 8 + 4 + 8) can take.
  if (n_kv > c.left() / 13 || n_tensors > c.left() / 32 || n_kv * 13 + n_tensors * 32 > c.left())
    fail(path, ": ", n_kv, " keys and ", n_tensors, " tensors cannot fit in the file's ", file_size_, " bytes");
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = c.str(cat("key ", i));
    if (key.empty()) fail(path, ": key ", i, " has an empty name");
    if (kv_.count(key)) fail(path, ": duplicate key ", key);
    GgufValue v = read_value(c, path, key);
    kv_.emplace(std::move(key), std::move(v));
  }
  tensors_.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    tensors_.push_back(read_tensor_info(c, path, i));
    if (!tensor_index_.emplace(tensors_.back().name, i).second) fail(path, ": duplicate tensor ", tensors_.back().name);
  }
  place_data(c.pos());
}

// The data section starts at the first multiple of the alignment past the tensor infos;
// each tensor's bytes must lie inside the file, at an aligned offset, apart from the others.
void GgufReader::place_data(uint64_t infos_end) {
  const uint64_t align =
      has("general.alignment") ? static_cast<uint64_t>(get_int("general.alignment", 1, kMaxAlignment)) : kGgufDefaultAlignment;
  if ((align & (align - 1)) != 0) fail(path_, ": key general.alignment is ", align, ", not a power of two");
  const uint64_t data_start = (infos_end + align - 1) / align * align;
  if (tensors_.empty()) return;
  if (data_start > file_size_) fail(path_, ": truncated: the data section would start at ", data_start, ", past the end");
  const uint64_t data_size = file_size_ - data_start;
  std::vector<GgufTensorInfo*> by_offset;
  for (GgufTensorInfo& t : tensors_) {
    if (t.offset % align != 0) fail(path_, ": tensor ", t.name, ": offset ", t.offset, " is not a multiple of ", align);
    if (t.offset > data_size || t.bytes > data_size - t.offset)
      fail(path_, ": tensor ", t.name, ": its ", t.bytes, " bytes at offset ", t.offset,
           " lie past the end of the data section (", data_size, " bytes)");
    t.offset += data_start;
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](const auto* a, const auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i - 1]->offset + by_offset[i - 1]->bytes > by_offset[i]->offset)
      fail(path_, ": tensors ", by_offset[i - 1]->name, " and ", by_offset[i]->name, " overlap");
}

const GgufValue& GgufReader::value(const std::string& key) const {
  const auto it = kv_.find(key);
  if (it == kv_.end()) fail(path_, ": missing key ", key);
  return it->second;
}

namespace {

[[noreturn]] void wrong_type(const std::string& path, const std::string& key, const GgufValue& v, const char* want) {
  fail(path, ": key ", key, " has GGUF type ", v.type, v.is_array() ? cat(" (array of ", v.elem_type, ")") : "",
       ", not ", want);
}

bool is_integer_type(uint32_t t) { return t <= 5 || t == 10 || t == 11; }

}  // namespace

int64_t GgufReader::get_int(const std::string& key, int64_t lo, int64_t hi) const {
  const GgufValue& v = value(key);
  if (!is_integer_type(v.type)) wrong_type(path_, key, v, "an integer");
  const int64_t x = v.ints[0];
  if (x < lo || x > hi) fail(path_, ": key ", key, " is ", x, ", out of range [", lo, ", ", hi, "]");
  return x;
}

double GgufReader::get_float(const std::string& key) const {
  const GgufValue& v = value(key);
  if (v.type != 6 && v.type != 12) wrong_type(path_, key, v, "a float");
  return v.floats[0];
}

bool GgufReader::get_bool(const std::string& key) const {
  const GgufValue& v = value(key);
  if (v.type != 7) wrong_type(path_, key, v, "a bool");
  return v.ints[0] != 0;
}

const std::string& GgufReader::get_string(const std::string& key) const {
  const GgufValue& v = value(key);
  if (v.type != kGgufString) wrong_type(path_, key, v, "a string");
  return v.strings[0];
}

const std::vector<std::string>& GgufReader::get_strings(const std::string& key) const {
  const GgufValue& v = value(key);
  if (!v.is_array() || v.elem_type != kGgufString) wrong_type(path_, key, v, "an array of strings");
  return v.strings;
}

const std::vector<int64_t>& GgufReader::get_ints(const std::string& key) const {
  const GgufValue& v = value(key);
  if (!v.is_array() || !is_integer_type(v.elem_type)) wrong_type(path_, key, v, "an array of integers");
  return v.ints;
}

const std::vector<int64_t>& GgufReader::get_bools(const std::string& key) const {
  const GgufValue& v = value(key);
  if (!v.is_array() || v.elem_type != 7) wrong_type(path_, key, v, "an array of bools");
  return v.ints;
}

const GgufTensorInfo* GgufReader::find_tensor(const std::string& name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

void GgufReader::read_f32(const GgufTensorInfo& t, float* out, int64_t n) {
  if (n != t.numel) fail(path_, ": tensor ", t.name, " holds ", t.numel, " values, ", n, " asked for");
  if (!readable_as_f32(t.type))
    fail(path_, ": tensor ", t.name, " has type ", describe_ggml_type(t.type), "; gatedlm reads ",
         kernels::element_names_readable());
  in_.clear();
  in_.seekg(static_cast<std::streamoff>(t.offset));
  const kernels::ElementTraits& traits = *kernels::find_element_type(t.type);
  // A chunk of whole blocks at a time, converted straight into `out`.
  constexpr int64_t kChunkBytes = int64_t{8} << 20;
  const int64_t blocks = t.numel / traits.block_values;
  const int64_t per_chunk = std::max<int64_t>(1, kChunkBytes / traits.block_bytes);
  std::vector<unsigned char> buf;
  for (int64_t b = 0; b < blocks; b += per_chunk) {
    const int64_t nb = std::min(per_chunk, blocks - b);
    buf.resize(static_cast<size_t>(nb * traits.block_bytes));
    in_.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(buf.size()));
    if (!in_) fail(path_, ": read error in tensor ", t.name);
    traits.to_f32(out + b * traits.block_values, buf.data(), nb * traits.block_values);
  }
}

void GgufReader::read_bytes(const GgufTensorInfo& t, uint64_t from, void* out, uint64_t n) {
  if (from > t.bytes || n > t.bytes - from)
    fail(path_, ": tensor ", t.name, ": bytes [", from, ", ", from + n, ") asked for, it holds ", t.bytes);
  in_.clear();
  in_.seekg(static_cast<std::streamoff>(t.offset + from));
  in_.read(static_cast<char*>(out), static_cast<std::streamsize>(n));
  if (!in_) fail(path_, ": read error in tensor ", t.name);
}

}  // namespace gatedlm::io
