// The paper family: the gated-attention paper's released checkpoints (QwQZh/gated_attention;
// io/hf_qwen3_layout.h): Qwen3 or Qwen3-MoE plus the keys headwise_attn_output_gate,
// elementwise_attn_output_gate (a sigmoid G1 gate), use_qk_norm and qkv_bias. The gate has no
// tensor of its own: its rows sit inside q_proj, grouped per KV group (io/hf_names.h,
// RowPart::paper_query / paper_gate), and q_proj.bias likewise. --format auto picks it when
// config.json has any of those keys. GGUF: none (llama.cpp runs the G1 gate only in its
// hybrid architectures; export refuses a gated model whose layers are all softmax).
#include "io/hf_qwen3_layout.h"
#include "io/model_family.h"

namespace gatedlm::io {

extern const ModelFamily kPaperFamily;

namespace {

// Without a gate, the paper's q_proj is Qwen3's (io/hf_names.cpp's map_parameters).
const std::vector<NameRule>& paper_name_table() {
  static const std::vector<NameRule> table = table_with({
      {"model.layers.{i}.self_attn.q_proj.weight", "model.layers.{i}.self_attn.q_proj.weight", RowPart::paper_query},
      {"model.layers.{i}.self_attn.gate.weight", "model.layers.{i}.self_attn.q_proj.weight", RowPart::paper_gate},
      {"model.layers.{i}.self_attn.q_proj.bias", "model.layers.{i}.self_attn.q_proj.bias", RowPart::paper_query},
      {"model.layers.{i}.self_attn.gate.bias", "model.layers.{i}.self_attn.q_proj.bias", RowPart::paper_gate},
  });
  return table;
}

constexpr Qwen3Layout kLayout{"paper", true, false, paper_name_table};

Claim claim(const nlohmann::json& hf) { return has_paper_keys(hf) ? Claim::layout_keys : Claim::none; }

}  // namespace

// No GGUF architecture: llama.cpp runs the G1 gate only in its hybrid architectures.
constinit const ModelFamily kPaperFamily = qwen3_layout_family<kLayout>(claim, nullptr);

}  // namespace gatedlm::io
