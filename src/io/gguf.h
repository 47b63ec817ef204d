#pragma once
// GGUF (version 3), the single-file format of llama.cpp / ggml, written from the format's
// specification (ggml docs/gguf.md): "GGUF", version, tensor count, key/value count; typed
// key/value metadata; tensor infos (name, dims innermost first, ggml type, offset into the
// data section); the data section, every tensor aligned to general.alignment (32).
//
// gatedlm writes llama.cpp's `qwen3` architecture, F32 or F16 (matrices F16, norms F32),
// for ungated models without attention biases (llama.cpp's qwen3 graph has neither), with
// the byte-level BPE vocabulary of a tokenizer.json when the checkpoint carries one; MoE
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

// Writes `path` (atomically). tokenizer_json: "" for none (the file then says "no_vocab").
void export_gguf(const Checkpoint& ck, GgufDtype dtype, const std::string& tokenizer_json, const std::string& path);

// The gatedlm parameter name -> GGUF tensor name table of the qwen3 architecture; throws
// naming a parameter it has no name for.
std::string gguf_tensor_name(const std::string& gatedlm_name);

}  // namespace gatedlm::io
