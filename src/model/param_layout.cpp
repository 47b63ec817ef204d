#include "model/param_layout.h"

#include "core/error.h"
#include "model/layer_kinds.h"
#include "model/switch_heads.h"

namespace gatedlm::model {

std::string layer_param(int64_t layer, const std::string& suffix) {
  return cat("model.layers.", layer, ".", suffix);
}

ParamLayout::ParamLayout(const ModelConfig& c) {
  const int64_t d = c.d_model;
  add("model.embed_tokens.weight", {c.vocab_size, d}, ParamKind::embedding);
  for (int64_t i = 0; i < c.n_layers; ++i) {
    add(layer_param(i, "input_layernorm.weight"), {d}, ParamKind::norm);
    LayerParams layer(*this, i);
    layer_spec(c, i).add_params(layer, c);  // the token mixer's tensors (layer_kinds.h)
    add(layer_param(i, "post_attention_layernorm.weight"), {d}, ParamKind::norm);
    if (c.sandwich_norm) {
      add(layer_param(i, "post_attn_branch_norm.weight"), {d}, ParamKind::norm);
      add(layer_param(i, "post_ffn_branch_norm.weight"), {d}, ParamKind::norm);
    }
    add_ffn(i, c);
  }
  add("model.norm.weight", {d}, ParamKind::norm);
  if (!c.tie_embeddings) add("lm_head.weight", {c.vocab_size, d}, ParamKind::lm_head);
}

void LayerParams::add(const std::string& suffix, std::vector<int64_t> shape, ParamKind kind) {
  layout_.add(layer_param(layer_, suffix), std::move(shape), kind);
}

void ParamLayout::add_ffn(int64_t i, const ModelConfig& c) {
  const int64_t d = c.d_model;
  if (c.moe.is_moe_layer(i)) {  // router, experts, shared expert (model/moe_config.h)
    for (const MoeTensor& t : moe_layer_tensors(c.moe, d)) add(layer_param(i, t.suffix), t.shape, ParamKind::matrix);
    return;
  }
  add(layer_param(i, "mlp.gate_proj.weight"), {c.ffn_hidden, d}, ParamKind::matrix);
  add(layer_param(i, "mlp.up_proj.weight"), {c.ffn_hidden, d}, ParamKind::matrix);
  add(layer_param(i, "mlp.down_proj.weight"), {d, c.ffn_hidden}, ParamKind::matrix);
}

void ParamLayout::add(std::string name, std::vector<int64_t> shape, ParamKind kind) {
  int64_t numel = 1;
  for (int64_t s : shape) numel *= s;
  specs_.push_back(ParamSpec{std::move(name), std::move(shape), total_, numel, kind});
  total_ += numel;
}

const ParamSpec* ParamLayout::find(const std::string& name) const {
  for (const ParamSpec& s : specs_)
    if (s.name == name) return &s;
  return nullptr;
}

const ParamSpec& ParamLayout::at(const std::string& name) const {
  const ParamSpec* s = find(name);
  if (!s) fail("no parameter named ", name);
  return *s;
}

int64_t ParamLayout::count(ParamKind kind) const {
  int64_t n = 0;
  for (const ParamSpec& s : specs_)
    if (s.kind == kind) n += s.numel;
  return n;
}

template <typename T, typename Matrix>
ModelViews<T, Matrix> make_views(const ParamLayout& layout, const ModelConfig& c, T* base) {
  auto ptr = [&](const std::string& name) -> T* {
    const ParamSpec* s = layout.find(name);
    return s ? base + s->offset : nullptr;
  };
  ModelViews<T, Matrix> v;
  v.embed = ptr("model.embed_tokens.weight");
  v.final_norm = ptr("model.norm.weight");
  v.lm_head = c.tie_embeddings ? v.embed : ptr("lm_head.weight");
  for (int64_t i = 0; i < c.n_layers; ++i) {
    auto p = [&](const char* suffix) { return ptr(layer_param(i, suffix)); };
    v.layers.push_back(LayerViews<T, Matrix>{
        p("input_layernorm.weight"), p("self_attn.q_proj.weight"), p("self_attn.k_proj.weight"),
        p("self_attn.v_proj.weight"), p("self_attn.o_proj.weight"), p("self_attn.q_norm.weight"),
        p("self_attn.k_norm.weight"), p("self_attn.gate.weight"), p("self_attn.sdpa_norm.weight"),
        p("post_attention_layernorm.weight"), p("post_attn_branch_norm.weight"),
        p("post_ffn_branch_norm.weight"), p("mlp.gate_proj.weight"), p("mlp.up_proj.weight"),
        p("mlp.down_proj.weight"), p("self_attn.q_proj.bias"), p("self_attn.k_proj.bias"),
        p("self_attn.v_proj.bias"), p("self_attn.gate.bias"), p("self_attn.o_proj.bias"),
        c.switch_heads.on() ? ptr(layer_param(i, switch_router_suffix(c))) : nullptr,
        p("self_attn.k_experts.0.weight"), p("self_attn.v_experts.0.weight")});
    LayerViews<T, Matrix>& l = v.layers.back();
    l.moe_router = p("mlp.gate.weight");
    l.moe_experts = p("mlp.experts.0.gate_proj.weight");
    l.moe_shared = p("mlp.shared_expert.gate_proj.weight");
    l.moe_shared_down = p("mlp.shared_expert.down_proj.weight");
    l.moe_shared_gate = p("mlp.shared_expert_gate.weight");
    l.linear = {p("linear_attn.in_proj_qkv.weight"), p("linear_attn.conv1d.weight"), p("linear_attn.dt_bias"),
                p("linear_attn.A_log"), p("linear_attn.norm.weight"), p("linear_attn.out_proj.weight")};
    l.sinks = p("self_attn.sinks");
  }
  return v;
}

template ModelViews<float> make_views<float>(const ParamLayout&, const ModelConfig&, float*);
template ModelViews<double> make_views<double>(const ParamLayout&, const ModelConfig&, double*);
template ModelViews<float, kernels::Weight<float>> make_views<float, kernels::Weight<float>>(const ParamLayout&,
                                                                                          const ModelConfig&, float*);
template ModelViews<double, kernels::Weight<double>> make_views<double, kernels::Weight<double>>(
    const ParamLayout&, const ModelConfig&, double*);

}  // namespace gatedlm::model
