#include "io/hf_weights.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_file.h"
#include "io/half_float.h"

namespace gatedlm::io {

namespace fs = std::filesystem;

static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

// One safetensors file: the parsed header, and where its data section starts (8 bytes of
// header length, then the header).
struct HfWeights::Shard {
  SafetensorsReader reader;
  uint64_t data_start = 0;
  explicit Shard(const std::string& path) : reader(path) {
    std::ifstream in(path, std::ios::binary);
    uint64_t header_len = 0;
    in.read(reinterpret_cast<char*>(&header_len), 8);
    if (!in) fail(path, ": cannot read the safetensors header length");
    data_start = 8 + header_len;
  }
};

HfWeights::~HfWeights() = default;

HfWeights::HfWeights(const std::string& dir) {
  const fs::path single = fs::path(dir) / "model.safetensors";
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(single)) {
    source_ = single.string();
    shards_.push_back(std::make_unique<Shard>(source_));
    for (const auto& [name, e] : shards_[0]->reader.tensors()) {
      entries_[name] = e;
      shard_of_[name] = 0;
    }
    return;
  }
  if (!fs::exists(index)) fail(dir, ": no model.safetensors and no model.safetensors.index.json");
  source_ = index.string();
  const nlohmann::json j = read_json_file(source_, "safetensors index");
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    fail(source_, ": no \"weight_map\" object");
  std::map<std::string, size_t> shard_index;  // file name -> position in shards_
  for (const auto& [name, file] : j["weight_map"].items()) {
    if (!file.is_string()) fail(source_, ": weight_map entry ", name, " is not a file name");
    const std::string f = file.get<std::string>();
    if (f.empty() || f.find('/') != std::string::npos || f.find('\\') != std::string::npos || f == "." || f == "..")
      fail(source_, ": weight_map entry ", name, " names \"", f, "\", not a file in the same directory");
    if (!shard_index.count(f)) {
      const fs::path p = fs::path(dir) / f;
      if (!fs::exists(p)) fail(source_, ": shard ", f, " (holding ", name, ") does not exist");
      shard_index[f] = shards_.size();
      shards_.push_back(std::make_unique<Shard>(p.string()));
    }
    const size_t s = shard_index[f];
    const SafetensorsReader& r = shards_[s]->reader;
    if (!r.has(name)) fail(source_, ": the index puts tensor ", name, " in ", f, ", which does not hold it");
    entries_[name] = r.entry(name);
    shard_of_[name] = s;
  }
  for (const auto& shard : shards_)
    for (const auto& [name, e] : shard->reader.tensors())
      if (!shard_of_.count(name) || shards_[shard_of_[name]].get() != shard.get())
        fail(shard->reader.path(), ": tensor ", name, " is not listed for this shard in ", source_);
}

const TensorEntry& HfWeights::entry(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) fail(source_, ": no tensor named ", name);
  return it->second;
}

std::string HfWeights::file_of(const std::string& name) const {
  entry(name);
  return shards_[shard_of_.at(name)]->reader.path();
}

void HfWeights::read_f32(const std::string& name, float* out, int64_t numel) const {
  const TensorEntry& e = entry(name);
  const Shard& shard = *shards_[shard_of_.at(name)];
  const std::string& path = shard.reader.path();
  if (e.numel() != numel) fail(path, ": tensor ", name, " has ", e.numel(), " elements, expected ", numel);
  int64_t width = 0;
  if (e.dtype == "F32") width = 4;
  else if (e.dtype == "BF16" || e.dtype == "F16") width = 2;
  else fail(path, ": tensor ", name, " has dtype ", e.dtype, "; gatedlm reads F32, BF16 and F16");
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(shard.data_start + e.begin));
  if (width == 4) {
    in.read(reinterpret_cast<char*>(out), static_cast<std::streamsize>(numel * 4));
  } else {
    // Chunks of 1 Mi values keep the 16-bit staging buffer small.
    const bool bf16 = e.dtype == "BF16";
    std::vector<uint16_t> chunk(std::min<int64_t>(numel, int64_t{1} << 20));
    for (int64_t done = 0; done < numel && in;) {
      const int64_t m = std::min<int64_t>(numel - done, static_cast<int64_t>(chunk.size()));
      in.read(reinterpret_cast<char*>(chunk.data()), static_cast<std::streamsize>(m * 2));
      for (int64_t i = 0; i < m; ++i) out[done + i] = bf16 ? bf16_to_f32(chunk[i]) : f16_to_f32(chunk[i]);
      done += m;
    }
  }
  if (!in) fail(path, ": tensor ", name, ": read failed (truncated?)");
}

kernels::ElementType parse_store_dtype(const std::string& name) {
  return kernels::parse_element_type(name, "--dtype", kHfStoreTypes);
}

int64_t TensorSource::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

void write_safetensors_as(const std::string& path, const std::vector<TensorSource>& tensors, kernels::ElementType dtype,
                          const std::map<std::string, std::string>& metadata) {
  std::vector<HeaderEntry> entries;
  for (const TensorSource& t : tensors)
    entries.push_back({t.name, kernels::element_traits(dtype).safetensors_dtype, t.shape,
                       static_cast<uint64_t>(kernels::element_row_bytes(dtype, t.numel()))});
  AtomicFile file(path);
  write_safetensors_header(file, path, entries, metadata);
  std::vector<float> values;
  std::string bytes;
  for (const TensorSource& t : tensors) {
    values.assign(static_cast<size_t>(t.numel()), 0.0f);
    t.produce(values.data());
    bytes.resize(static_cast<size_t>(kernels::element_row_bytes(dtype, t.numel())));
    kernels::element_from_f32(dtype, bytes.data(), values.data(), t.numel());
    file.write(bytes);
  }
  file.commit();
}

}  // namespace gatedlm::io
