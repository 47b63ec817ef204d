#pragma once
// GGUF (version 3), the single-file format of llama.cpp / ggml, written from the format's
// specification (ggml docs/gguf.md): "GGUF", version, tensor count, key/value count; typed
// key/value metadata; tensor infos (name, dims innermost first, ggml type, offset into the
// data section); the data section, every tensor aligned to general.alignment (32).
//
// gatedlm writes llama.cpp's architectures (io/gguf_tables.h): `qwen3` for ungated models,
// `qwen35` (or, MoE only and asked for, `qwen3next`) for hybrids of Gated DeltaNet layers and softmax layers with the paper's G1 gate
// (elementwise sigmoid on the SDPA output, reading all of d_model; the gate's rows fused per
// head into attn_q), and their MoE forms `qwen3moe` / `qwen35moe`. A G1-gated model whose
// layers are all softmax is refused: llama.cpp aborts on it (bench/RESULTS.md); in F32, F16, BF16, Q8_0 or Q4_0 (which tensors keep F32:
// io/gguf_encode.h). What an architecture cannot run (other gate variants, attention
// biases, switch heads, ...) is refused by config key before anything is written. The
// vocabulary is the byte-level BPE of a tokenizer.json when the checkpoint carries one (else
// the byte tokenizer's, as llama.cpp's "gpt2" tokenizer with no merges).
#include <cstdint>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "model/weight_recipes.h"
#include "io/gguf_encode.h"

namespace gatedlm::io {

// The vocabulary written: a tokenizer.json path (checked as load_tokenizer_json checks it),
// or kByteVocabulary for gatedlm's byte tokenizer (ids 0..255 bytes, 256 BOS, 257 EOS).
// llama.cpp cannot load a GGUF without one.
inline constexpr const char* kByteVocabulary = "byte";
inline constexpr int64_t kByteVocabularySize = 258;
// The architecture written: "auto" (gguf_architecture: qwen3 / qwen3moe ungated, qwen35 /
// qwen35moe gated) or one named, checked against the model: a gated MoE model may also be
// qwen3next. Throws naming the --gguf-arch value and what the model lacks.
std::string resolve_gguf_architecture(const model::ModelConfig& c, const std::string& requested);
// --gguf-arch's values for its help text: "auto (...) | qwen3 | qwen3moe | ...", every
// registered family's architecture (io/model_family.h).
std::string gguf_architecture_help();
// Writes `path` (atomically) in the architecture resolve_gguf_architecture gives, each
// tensor in the type `recipe` gives it (io/gguf_encode.h: one type, or a llama.cpp mix such
// as q4_k_m); everything is checked before the file is created. A non-empty `chat_template`
// (the Jinja text, io/chat_template_source.h) is written as tokenizer.chat_template, where
// llama.cpp reads it.
void export_gguf(const Checkpoint& ck, const model::WeightRecipe& recipe, const std::string& tokenizer,
                 const std::string& path, const std::string& architecture = "auto",
                 const std::string& chat_template = "");
// The same for the uniform recipe of `dtype`.
void export_gguf(const Checkpoint& ck, kernels::ElementType dtype, const std::string& tokenizer, const std::string& path,
                 const std::string& architecture = "auto");
// A key of gatedlm's own (llama.cpp ignores it): whether the model's norms were
// zero-centred, x_hat * (1 + w) (stored plus one), so that import gives them back as they
// were. Files without it are read as their architecture's converter writes them.
inline constexpr const char* kGgufNormZeroCenteredKey = "gatedlm.norm_zero_centered";

}  // namespace gatedlm::io
