#pragma once
// The weights of a Hugging Face model directory: `model.safetensors`, or the shards named
// by `model.safetensors.index.json` ({"weight_map": {tensor: shard file}}). Tensors may be
// F32, BF16 or F16; they are read one at a time, converted to fp32, so a reader never holds
// more than the tensor asked for. And the writer for exports: safetensors in F32, BF16 or
// F16, streamed one tensor at a time.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/safetensors.h"

#include "kernels/element_types.h"

namespace gatedlm::io {

class HfWeights {
 public:
  // Throws naming the file when neither file exists, the index is malformed, a shard is
  // missing, or the index and the shards disagree about a tensor.
  explicit HfWeights(const std::string& dir);
  ~HfWeights();
  // Every tensor, name -> entry (dtype, shape).
  const std::map<std::string, TensorEntry>& tensors() const { return entries_; }
  bool has(const std::string& name) const { return entries_.count(name) != 0; }
  const TensorEntry& entry(const std::string& name) const;
  std::string file_of(const std::string& name) const;  // the shard that holds it
  // Reads tensor `name` (numel elements) into out as fp32; F32, BF16 and F16 only.
  void read_f32(const std::string& name, float* out, int64_t numel) const;
  // What the weights came from: "model.safetensors" or the index file.
  const std::string& source() const { return source_; }

 private:
  struct Shard;
  std::string source_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::map<std::string, TensorEntry> entries_;
  std::map<std::string, size_t> shard_of_;
};

// The types exported weights are stored in (kernels/element_types.h: their safetensors
// dtype and encoding), and --dtype's choice of one (throws naming --dtype and the values).
inline constexpr kernels::ElementType kHfStoreTypes[] = {kernels::ElementType::f32, kernels::ElementType::bf16,
                                                         kernels::ElementType::f16};
kernels::ElementType parse_store_dtype(const std::string& name);

// One tensor to write: its fp32 values come from produce(out), out sized to numel.
struct TensorSource {
  std::string name;
  std::vector<int64_t> shape;
  std::function<void(float* out)> produce;
  int64_t numel() const;
};

// Writes a safetensors file atomically, tensors in the order given, each converted to
// `dtype` as it is produced (one tensor in memory at a time).
void write_safetensors_as(const std::string& path, const std::vector<TensorSource>& tensors, kernels::ElementType dtype,
                          const std::map<std::string, std::string>& metadata = {});


}  // namespace gatedlm::io
