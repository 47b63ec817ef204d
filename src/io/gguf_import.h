#pragma once
// Import of a GGUF file (llama.cpp's format, io/gguf_reader.h) into a gatedlm checkpoint:
// the architectures gatedlm represents (qwen3, qwen3moe, and the hybrids qwen35, qwen35moe,
// qwen3next: io/gguf_import_hybrid.h), read by the same tables GGUF
// export writes by (io/gguf_tables.h), weights of every type with a conversion to fp32
// (kernels::element_names_readable(): F32, F16, BF16, Q8_0, Q4_0, the K-quants, IQ4_NL /
// IQ4_XS, ...; other types are refused by name), the vocabulary as a tokenizer.json
// (io/gguf_tokenizer.h). The blocks of the quantised tensors are kept as they are where they
// can be (io/gguf_blocks.h): io/model_loader.h runs them so, and `import` writes them into a
// quantised checkpoint.
//
// Refused, naming the file and the key or tensor, before any value is read: another
// architecture, a key under the architecture's prefix that gatedlm does not map (RoPE
// scaling, sliding windows, ...), a key out of range, two keys of one config field that
// disagree, a missing, unexpected or misshapen tensor, a tensor type it cannot read; then
// NaN or Inf weights, naming tensor and element.
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "io/gguf_tensor.h"
#include "io/gguf_tokenizer.h"
#include "model/quantized_weights.h"

namespace gatedlm::io {

class GgufReader;

// A GGUF file opened for import: the metadata, the tensor table and the vocabulary read and
// checked (every refusal above but the weights' values); the weights read when asked, as F32
// or, for the tensors that can stay so, as their blocks (io/gguf_blocks.h).
class GgufImport {
 public:
  explicit GgufImport(const std::string& path);
  ~GgufImport();
  GgufImport(const GgufImport&) = delete;
  GgufImport& operator=(const GgufImport&) = delete;

  const model::ModelConfig& config() const { return config_; }
  const std::string& architecture() const { return architecture_; }  // general.architecture
  const GgufVocabulary& vocabulary() const { return vocabulary_; }
  // What of the file was left out, for the import's message; empty: nothing.
  const std::string& skipped() const { return skipped_; }

  // The parameters whose tensors can stay in their blocks, in their formats (none for a file
  // of F32 / F16 weights).
  model::WeightFormats block_formats() const;
  // Every weight, checked finite (then the inverse value maps, io/gguf_tensor.h): the
  // tensors whose parameters `blocks` holds into their blocks (blocks null: none), the
  // others as F32 into params (laid out by ParamLayout(config())). The parameters held in
  // blocks are not written in params.
  void read_weights(std::span<float> params, model::QuantizedWeights* blocks);

 private:
  std::unique_ptr<GgufReader> file_;
  std::string architecture_, skipped_;
  model::ModelConfig config_;
  std::unique_ptr<model::ParamLayout> layout_;  // the tensors' runs point into it
  std::vector<GgufTensor> wanted_;
  GgufVocabulary vocabulary_;
};

struct ImportedGguf {
  Checkpoint checkpoint;
  std::string architecture;     // general.architecture
  std::string tokenizer_json;   // the tokenizer.json to write; empty: none (io/gguf_tokenizer.h)
  std::string vocabulary;       // what the vocabulary became, for the import's message
  bool byte_tokenizer = false;  // the file holds gatedlm's byte tokenizer's vocabulary
  std::string skipped;          // what of the file was left out, for the import's message; empty: nothing
};

// The whole file as an F32 checkpoint (every tensor expanded).
ImportedGguf import_gguf(const std::string& path);

// Whether `path` is a regular file that starts with GGUF's magic "GGUF".
bool is_gguf_file(const std::string& path);

}  // namespace gatedlm::io
