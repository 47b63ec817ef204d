#include "io/safetensors.h"

#include <algorithm>
#include <bit>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_file.h"
#include "core/memory.h"

namespace gatedlm::io {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

int64_t dtype_size(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL" || dtype == "F8_E4M3" || dtype == "F8_E5M2") return 1;
  return 0;
}

}  // namespace

// The format's own limit on the JSON header (the reference implementation refuses more).
constexpr uint64_t kMaxSafetensorsHeader = 100'000'000;

int64_t TensorEntry::numel() const {
  // An entry that passed the header checks fits in its file; a zero anywhere makes it empty
  // (checked first, so that [2^62, 2^62, 0] does not overflow on the way).
  for (int64_t s : shape)
    if (s == 0) return 0;
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

SafetensorsReader::SafetensorsReader(std::string path) : path_(std::move(path)) {
  std::error_code ec;
  if (std::filesystem::is_directory(path_, ec)) fail(path_, ": is a directory, not a safetensors file");
  const uint64_t file_size = std::filesystem::file_size(path_, ec);
  if (ec) fail(path_, ": cannot open (", ec.message(), ")");
  std::ifstream in(path_, std::ios::binary);
  if (!in) fail(path_, ": cannot open");
  if (file_size < 8) fail(path_, ": truncated (", file_size, " bytes, no safetensors header)");
  uint64_t header_len = 0;
  in.read(reinterpret_cast<char*>(&header_len), 8);
  if (header_len > kMaxSafetensorsHeader)
    fail(path_, ": the safetensors header says ", header_len, " bytes, more than the format's limit of ",
         kMaxSafetensorsHeader, " (not a safetensors file?)");
  if (header_len > file_size - 8)
    fail(path_, ": truncated or not safetensors (header says ", header_len, " bytes, file has ", file_size, ")");
  std::string header(header_len, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_len));
  if (!in) fail(path_, ": read error in the safetensors header");
  data_start_ = 8 + header_len;
  parse_safetensors_header(header, file_size - data_start_, path_, tensors_, metadata_);
}

void parse_safetensors_header(std::string_view header, uint64_t data_size, const std::string& path,
                              std::map<std::string, TensorEntry>& tensors,
                              std::map<std::string, std::string>& metadata) {
  const nlohmann::json j = parse_json_strict(header, path + ": the safetensors header");
  if (!j.is_object()) fail(path, ": the safetensors header is not a JSON object");
  for (auto& [name, v] : j.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) fail(path, ": __metadata__ must be an object of strings, got ", v.type_name());
      for (auto& [key, value] : v.items()) {
        if (!value.is_string())
          fail(path, ": __metadata__ key \"", key, "\" must map to a string, got ", value.type_name());
        metadata[key] = value.get<std::string>();
      }
      continue;
    }
    try {
      if (!v.is_object()) fail("expected an object {dtype, shape, data_offsets}");
      for (auto& [key, unused] : v.items())
        if (key != "dtype" && key != "shape" && key != "data_offsets") fail("unexpected field \"", key, "\"");
      TensorEntry e;
      e.dtype = v.at("dtype").get<std::string>();
      e.shape = v.at("shape").get<std::vector<int64_t>>();
      auto offsets = v.at("data_offsets").get<std::vector<uint64_t>>();
      if (offsets.size() != 2) fail("data_offsets must have two entries");
      e.begin = offsets[0];
      e.end = offsets[1];
      const int64_t size = dtype_size(e.dtype);
      if (size == 0) fail("unknown dtype ", e.dtype);
      uint64_t bytes = static_cast<uint64_t>(size);
      for (int64_t s : e.shape) {
        if (s < 0) fail("negative dimension");
        bytes = saturating_mul(bytes, static_cast<uint64_t>(s));
      }
      if (bytes > data_size) fail("shape needs ", bytes, " bytes but the file holds ", data_size, " data bytes");
      if (e.end < e.begin || e.end - e.begin != bytes)
        fail("data_offsets [", e.begin, ", ", e.end, "] do not match shape and dtype (", bytes, " bytes)");
      if (e.end > data_size)
        fail("data ends at byte ", e.end, " but the file holds ", data_size, " data bytes (truncated?)");
      tensors[name] = e;
    } catch (const nlohmann::json::exception& ex) {
      fail(path, ": tensor ", name, ": malformed header entry (", ex.what(), ")");
    } catch (const Error& ex) {
      fail(path, ": tensor ", name, ": ", ex.what());
    }
  }
  // The data section is the tensors back to back: from byte 0, no gap, no overlap, nothing after.
  std::vector<std::pair<const std::string*, const TensorEntry*>> by_offset;
  for (const auto& [name, e] : tensors) by_offset.emplace_back(&name, &e);
  std::sort(by_offset.begin(), by_offset.end(), [](const auto& a, const auto& b) {
    return a.second->begin != b.second->begin ? a.second->begin < b.second->begin : a.second->end < b.second->end;
  });
  uint64_t expected = 0;
  const std::string* previous = nullptr;
  for (const auto& [name, e] : by_offset) {
    if (e->begin < expected)
      fail(path, ": tensor ", *name, " (data_offsets [", e->begin, ", ", e->end, "]) overlaps tensor ", *previous);
    if (e->begin > expected)
      fail(path, ": a gap in the data: bytes ", expected, "..", e->begin, " before tensor ", *name,
           " belong to no tensor");
    expected = e->end;
    previous = name;
  }
  if (expected != data_size)
    fail(path, ": ", data_size - expected, " trailing bytes after the last tensor's data (the data section holds ",
         data_size, " bytes, the tensors ", expected, ")");
}

const TensorEntry& SafetensorsReader::entry(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) fail(path_, ": no tensor named ", name);
  return it->second;
}

void SafetensorsReader::read_f32(const std::string& name, std::vector<float>& out) const {
  out.resize(entry(name).numel());
  read_f32(name, out.data(), static_cast<int64_t>(out.size()));
}

void SafetensorsReader::read_f32(const std::string& name, float* out, int64_t numel) const {
  const TensorEntry& e = entry(name);
  if (e.dtype != "F32") fail(path_, ": tensor ", name, " has dtype ", e.dtype, ", expected F32");
  if (e.numel() != numel) fail(path_, ": tensor ", name, " has ", e.numel(), " elements, expected ", numel);
  std::ifstream in(path_, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(data_start_ + e.begin));
  in.read(reinterpret_cast<char*>(out), static_cast<std::streamsize>(e.end - e.begin));
  if (!in) fail(path_, ": tensor ", name, ": read failed (truncated?)");
}

void SafetensorsReader::read_bytes(const std::string& name, const std::string& dtype, void* out,
                                   uint64_t bytes) const {
  const TensorEntry& e = entry(name);
  if (e.dtype != dtype) fail(path_, ": tensor ", name, " has dtype ", e.dtype, ", expected ", dtype);
  if (e.end - e.begin != bytes) fail(path_, ": tensor ", name, " holds ", e.end - e.begin, " bytes, expected ", bytes);
  std::ifstream in(path_, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(data_start_ + e.begin));
  in.read(static_cast<char*>(out), static_cast<std::streamsize>(bytes));
  if (!in) fail(path_, ": tensor ", name, ": read failed (truncated?)");
}

void write_safetensors_header(AtomicFile& file, const std::string& path, const std::vector<HeaderEntry>& entries,
                              const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header;
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const HeaderEntry& e : entries) {
    if (header.contains(e.name)) fail(path, ": tensor ", e.name, " given twice");
    header[e.name] = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {offset, offset + e.bytes}}};
    offset += e.bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keep the data 8-byte aligned
  const uint64_t header_len = text.size();
  file.write(&header_len, 8);
  file.write(text);
}

void write_safetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  auto numel = [](const TensorRef& t) {
    int64_t n = 1;
    for (int64_t s : t.shape) n *= s;
    return n;
  };
  std::vector<HeaderEntry> entries;
  for (const TensorRef& t : tensors) entries.push_back({t.name, "F32", t.shape, static_cast<uint64_t>(numel(t)) * 4});
  AtomicFile file(path);
  write_safetensors_header(file, path, entries, metadata);
  for (const TensorRef& t : tensors) file.write(t.data, static_cast<size_t>(numel(t)) * 4);
  file.commit();
}

}  // namespace gatedlm::io
