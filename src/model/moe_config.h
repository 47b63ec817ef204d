#pragma once
// The mixture-of-experts FFN's configuration: the `moe` object of config.json, its
// defaults, its checks and the parameter counts it implies (gatedlm params).
//
//   moe: { n_experts, top_k, expert_hidden,          (required)
//          n_shared [0], shared_hidden [expert_hidden], every [1],
//          norm_topk_prob [true], lb_coef [0.001], lb_scope: global|micro [global],
//          z_coef [0.001] }
//
// Layer l (0-based) is an MoE layer when (l + 1) % every == 0 (Qwen2-MoE's
// decoder_sparse_step); the other layers keep the dense SwiGLU FFN of width ffn_hidden.
// n_shared shared experts of width shared_hidden run as one SwiGLU expert of width
// n_shared * shared_hidden (the same function) behind a sigmoid gate, as Qwen2-MoE's
// shared_expert / shared_expert_gate.
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

namespace gatedlm::model {

// Over which tokens the load-balancing loss counts expert loads f_i: every micro-batch
// of the optimizer step on every rank (global, Qiu et al. 2025) or each micro-batch alone.
enum class LbScope { global, micro };

struct MoeConfig {
  int64_t n_experts = 0;  // 0: no MoE (no `moe` object)
  int64_t top_k = 0;
  int64_t expert_hidden = 0;
  int64_t n_shared = 0;
  int64_t shared_hidden = 0;  // defaults to expert_hidden
  int64_t every = 1;
  bool norm_topk_prob = true;
  double lb_coef = 0.001;
  LbScope lb_scope = LbScope::global;
  double z_coef = 0.001;

  bool enabled() const { return n_experts > 0; }
  bool is_moe_layer(int64_t layer) const { return enabled() && (layer + 1) % every == 0; }
  int64_t moe_layers(int64_t n_layers) const { return enabled() ? n_layers / every : 0; }
  int64_t shared_width() const { return n_shared * shared_hidden; }  // the fused shared expert
  // Parameters of one routed expert (gate, up, down) and of one MoE layer's router and
  // shared-expert gate.
  int64_t expert_params(int64_t d_model) const { return 3 * d_model * expert_hidden; }
  int64_t gate_params(int64_t d_model) const { return n_experts * d_model + (n_shared > 0 ? d_model : 0); }
};

// An integer key of a config object (`where` names the object in messages): the fallback
// when absent, an error when absent without one or not an integer. Shared by the nested
// config objects (moe, linear_attention).
int64_t int_key(const nlohmann::json& j, const std::string& where, const char* key, std::optional<int64_t> fallback);

// Parses the `moe` object; `where` names it in messages ("config.json: moe").
MoeConfig moe_config_from_json(const nlohmann::json& j, const std::string& where);
nlohmann::json moe_config_to_json(const MoeConfig& m);
// Throws gatedlm::Error naming the key ("moe.top_k") when the values cannot work.
void validate_moe(const MoeConfig& m, int64_t d_model, int64_t n_layers);
std::string to_string(LbScope s);

// The tensors of one MoE layer, in layout order (suffixes after "model.layers.{i}."), with
// the Hugging Face Qwen3-MoE / Qwen2-MoE names: mlp.gate.weight [E, d] (router),
// mlp.experts.{e}.{gate,up,down}_proj.weight, mlp.shared_expert.{gate,up,down}_proj.weight,
// mlp.shared_expert_gate.weight [1, d]. Each expert's gate_proj and up_proj are adjacent
// (one product), and the experts follow each other with a fixed stride.
struct MoeTensor {
  std::string suffix;
  std::vector<int64_t> shape;
};
std::vector<MoeTensor> moe_layer_tensors(const MoeConfig& m, int64_t d_model);

}  // namespace gatedlm::model
