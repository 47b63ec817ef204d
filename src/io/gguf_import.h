#pragma once
// Import of a GGUF file (llama.cpp's format, io/gguf_reader.h) into a gatedlm checkpoint:
// the architectures gatedlm represents (qwen3, qwen3moe, and the hybrids qwen35, qwen35moe,
// qwen3next: io/gguf_import_hybrid.h), read by the same tables GGUF
// export writes by (io/gguf_tables.h), weights F32, F16 or BF16 (Q8_0 and Q4_0 are
// dequantised to F32; other quantised types are refused by name), the vocabulary as a
// tokenizer.json (io/gguf_tokenizer.h).
//
// Refused, naming the file and the key or tensor, before any value is read: another
// architecture, a key under the architecture's prefix that gatedlm does not map (RoPE
// scaling, sliding windows, ...), a key out of range, two keys of one config field that
// disagree, a missing, unexpected or misshapen tensor, a tensor type it cannot read; then
// NaN or Inf weights, naming tensor and element.
#include <string>

#include "io/checkpoint.h"

namespace gatedlm::io {

struct ImportedGguf {
  Checkpoint checkpoint;
  std::string architecture;     // general.architecture
  std::string tokenizer_json;   // the tokenizer.json to write; empty: none (io/gguf_tokenizer.h)
  std::string vocabulary;       // what the vocabulary became, for the import's message
  bool byte_tokenizer = false;  // the file holds gatedlm's byte tokenizer's vocabulary
  std::string skipped;          // what of the file was left out, for the import's message; empty: nothing
};

ImportedGguf import_gguf(const std::string& path);

// Whether `path` is a regular file that starts with GGUF's magic "GGUF".
bool is_gguf_file(const std::string& path);

}  // namespace gatedlm::io
