// The qwen3 family: transformers' Qwen3 (model_type "qwen3"; io/hf_qwen3_layout.h): QK-norm,
// no gate, one attention_bias key for q, k, v and o; tensors as gatedlm names them (the
// identity table of io/hf_names.h). --format qwen3 also reads and writes Qwen3-MoE configs
// (model_type "qwen3_moe"), as it always has. --format auto falls back to it, so that an
// unknown model_type is refused by name. GGUF: llama.cpp's qwen3 (export's choice for an
// ungated dense model): the Qwen3 tensor names, the shared keys only (io/gguf_tables.h).
#include "io/gguf_tables.h"
#include "io/hf_qwen3_layout.h"
#include "io/model_family.h"

namespace gatedlm::io {

extern const ModelFamily kQwen3Family;

namespace {

constexpr Qwen3Layout kLayout{"qwen3", false, false, qwen3_name_table};
// llama.cpp's qwen3: ungated, dense, picked by --gguf-arch auto.
constexpr GgufArchitecture kGguf{"qwen3", false, false, false, false, false, true,
                                 nullptr, gguf_ungated_names};

Claim claim(const nlohmann::json&) { return Claim::fallback; }

}  // namespace

constinit const ModelFamily kQwen3Family = qwen3_layout_family<kLayout>(claim, &kGguf);

}  // namespace gatedlm::io
