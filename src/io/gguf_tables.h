#pragma once
// The tables GGUF export (io/gguf.cpp) writes by and GGUF import (io/gguf_import.cpp) reads
// by, so that the two directions cannot drift apart: which GGUF tensors hold a gatedlm
// parameter layout (llama.cpp's names, MoE experts stacked) and which metadata keys hold
// the model config's numbers. Defined in io/gguf.cpp, beside the writer.
//
// Adding an architecture (qwen35, qwen35moe, qwen3next once gatedlm has hybrid layers) is
// rows here: its tensor names in gguf_tensors (through gguf_tensor_name), its keys in
// gguf_int_keys / gguf_float_keys, its name in gguf_architecture; the importer accepts every
// architecture gguf_architecture can return (kGgufImportArchitectures in io/gguf_import.cpp).
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/param_layout.h"

namespace gatedlm::io {

// One GGUF tensor: its name, shape (outermost first; GGUF stores the dims innermost first)
// and the gatedlm parameters stored one after another in it: one, or for qwen3moe's
// stacked expert tensors ffn_{gate,up,down}_exps [E, rows, cols] one per expert, in order.
struct GgufTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<const model::ParamSpec*> parts;
};
// Every parameter of the layout, in layout order of first use. Throws naming a parameter
// that has no GGUF name.
std::vector<GgufTensor> gguf_tensors(const model::ParamLayout& layout);

// "qwen3", or "qwen3moe" for an MoE model: the value of general.architecture and the
// prefix of the keys below.
std::string gguf_architecture(const model::ModelConfig& c);

// A config number stored under "<architecture>.<key>": a field of ModelConfig, or (moe_field
// set) of its MoeConfig, written only for MoE models. Several keys may hold one field
// (key_length and value_length are both head_dim): import requires them to agree.
struct GgufIntKey {
  const char* key;
  int64_t model::ModelConfig::*field;
  int64_t model::MoeConfig::*moe_field;
};
struct GgufFloatKey {
  const char* key;
  double model::ModelConfig::*field;
};
const std::vector<GgufIntKey>& gguf_int_keys();
const std::vector<GgufFloatKey>& gguf_float_keys();

inline int64_t& gguf_field(model::ModelConfig& c, const GgufIntKey& k) {
  return k.field ? c.*k.field : c.moe.*k.moe_field;
}
inline int64_t gguf_field(const model::ModelConfig& c, const GgufIntKey& k) {
  return k.field ? c.*k.field : c.moe.*k.moe_field;
}

}  // namespace gatedlm::io
