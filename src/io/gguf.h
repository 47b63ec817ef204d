#pragma once
// GGUF (version 3), the single-file format of llama.cpp / ggml, written from the format's
// specification (ggml docs/gguf.md): "GGUF", version, tensor count, key/value count; typed
// key/value metadata; tensor infos (name, dims innermost first, ggml type, offset into the
// data section); the data section, every tensor aligned to general.alignment (32).
//
// gatedlm writes llama.cpp's `qwen3` architecture, F32 or F16 (matrices F16, norms F32),
// for ungated models without attention biases (llama.cpp's qwen3 graph has neither), with
// the byte-level BPE vocabulary of a tokenizer.json when the checkpoint carries one (else
// the byte tokenizer's, as llama.cpp's "gpt2" tokenizer with no merges); MoE
// models (every layer sparse, no shared expert, renormalised top-k) as `qwen3moe`, the
// router as ffn_gate_inp and each kind of expert matrix stacked over the experts
// (ffn_{gate,up,down}_exps [E, rows, cols]).
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "io/checkpoint.h"

namespace gatedlm::io {

enum class GgufDtype { f32, f16 };

// The vocabulary written: a tokenizer.json path (checked as load_tokenizer_json checks it),
// or kByteVocabulary for gatedlm's byte tokenizer (ids 0..255 bytes, 256 BOS, 257 EOS).
// llama.cpp cannot load a GGUF without one.
inline constexpr const char* kByteVocabulary = "byte";
inline constexpr int64_t kByteVocabularySize = 258;
// Writes `path` (atomically); everything is checked before the file is created.
void export_gguf(const Checkpoint& ck, GgufDtype dtype, const std::string& tokenizer, const std::string& path);

// The gatedlm parameter name -> GGUF tensor name table of the qwen3 architecture; throws
// naming a parameter it has no name for.
std::string gguf_tensor_name(const std::string& gatedlm_name);

}  // namespace gatedlm::io
