#pragma once
// Where every parameter lives: one flat buffer per kind (weights, grads, Adam moments),
// carved into named views in a fixed order. The names are the checkpoint names (Hugging
// Face Qwen3 conventions), so this table is also the checkpoint's tensor map.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "kernels/weight.h"
#include "model/config.h"

namespace gatedlm::model {

// switch_router: the routers of switch heads (model/switch_heads.h); their experts are
// matrices. The Gated DeltaNet layers' convolution (conv), A_log and dt_bias (decay) and
// gated output norm (linear_norm: always plain, initialised at 1) have kinds of their own
// for their initialisation (model/init.cpp).
// sink: the learned sink logits of softmax layers (attention_sinks), initialised at 0.
enum class ParamKind { embedding, lm_head, matrix, norm, gate, bias, switch_router, conv, decay, linear_norm, sink };

struct ParamSpec {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;  // into the flat buffer, in elements
  int64_t numel = 0;
  ParamKind kind;
  // Weight decay applies to matrices (ndim >= 2), never to norms, biases or constant gates.
  bool decays() const { return shape.size() >= 2; }
};

class ParamLayout;

// One layer's tensors as its kind's add_params (layer_kinds.h) adds them: each named
// model.layers.{layer}.{suffix} and appended to the layout.
class LayerParams {
 public:
  LayerParams(ParamLayout& layout, int64_t layer) : layout_(layout), layer_(layer) {}
  void add(const std::string& suffix, std::vector<int64_t> shape, ParamKind kind);
  int64_t layer() const { return layer_; }

 private:
  ParamLayout& layout_;
  int64_t layer_;
};

class ParamLayout {
 public:
  explicit ParamLayout(const ModelConfig& config);
  const std::vector<ParamSpec>& specs() const { return specs_; }
  int64_t total() const { return total_; }
  const ParamSpec* find(const std::string& name) const;  // null when absent
  const ParamSpec& at(const std::string& name) const;    // throws when absent

  // Counts for `gatedlm params`: embedding = embed_tokens plus an untied lm_head;
  // non-embedding = total - embedding; gate = the attention gates' parameters.
  int64_t count(ParamKind kind) const;
  int64_t embedding_count() const { return count(ParamKind::embedding) + count(ParamKind::lm_head); }

 private:
  friend class LayerParams;
  void add(std::string name, std::vector<int64_t> shape, ParamKind kind);
  void add_ffn(int64_t layer, const ModelConfig& c);
  std::vector<ParamSpec> specs_;
  int64_t total_ = 0;
};

std::string layer_param(int64_t layer, const std::string& suffix);  // "model.layers.{i}.{suffix}"

// Typed pointers into one flat buffer (weights or grads) laid out by ParamLayout.
// Pointers of absent tensors are null. Matrix is the type of the matrices' views: T* for
// gradients (and any plain buffer), kernels::Weight<T> for the weights the products read,
// which carry their stored form when a store is attached (kernels/weight.h; LayerWeights
// below).
// A Gated DeltaNet layer's tensors (model/gated_deltanet.h); in_proj is in_proj_qkv, with
// in_proj_z, in_proj_b and in_proj_a adjacent after it.
template <typename T, typename Matrix = T*>
struct LinearAttentionViews {
  Matrix in_proj{};
  T *conv = nullptr, *dt_bias = nullptr, *A_log = nullptr, *norm = nullptr;
  Matrix out_proj{};
};

template <typename T, typename Matrix = T*>
struct LayerViews {
  T* input_norm;
  Matrix wq, wk, wv, wo;
  T *q_norm, *k_norm;
  Matrix gate;  // [gate_out, gate_in] for a gate that reads the hidden state, else a vector
  T *sdpa_norm, *ffn_norm, *attn_branch_norm, *ffn_branch_norm;
  Matrix w_gate, w_up, w_down;
  // Attention biases (null when the config has none); bq..bgate are adjacent, so bq
  // spans the whole fused q|k|v|gate product's bias.
  T *bq, *bk, *bv, *bgate, *bo;
  // Switch heads (null when off): the router and the first of the adjacent experts; with
  // switch heads on, wv (and wk with experts_on kv) is null.
  Matrix switch_router, k_experts, v_experts;
  // MoE layers (null elsewhere; model/moe.h): the router [E, d]; expert 0's gate_proj,
  // with expert e's gate_proj|up_proj|down_proj at moe_experts + e * 3 * f * d; the shared
  // expert's gate_proj (up_proj follows), its down_proj and its sigmoid gate [1, d].
  Matrix moe_router{}, moe_experts{}, moe_shared{}, moe_shared_down{}, moe_shared_gate{};
  LinearAttentionViews<T, Matrix> linear{};  // linear-attention layers (null elsewhere)
  T* sinks = nullptr;  // [n_heads] learned sink logits (attention_sinks; null without)
};
template <typename T, typename Matrix = T*>
struct ModelViews {
  T* embed;  // the embedding lookup copies its rows
  T* final_norm;
  Matrix lm_head;  // == embed when tied
  std::vector<LayerViews<T, Matrix>> layers;
};
// The weights' views: what the forward products read (kernels/weight.h).
template <typename T>
using LinearAttentionWeights = LinearAttentionViews<T, kernels::Weight<T>>;
template <typename T>
using LayerWeights = LayerViews<T, kernels::Weight<T>>;
template <typename T>
using ModelWeights = ModelViews<T, kernels::Weight<T>>;

template <typename T, typename Matrix = T*>
ModelViews<T, Matrix> make_views(const ParamLayout& layout, const ModelConfig& config, T* base);

// Calls f on every matrix view of a layer, and of the model (lm_head), once each.
template <typename T, typename Matrix, typename F>
void for_each_matrix(LayerViews<T, Matrix>& l, F&& f) {
  for (Matrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.w_gate, &l.w_up, &l.w_down, &l.switch_router,
                    &l.k_experts, &l.v_experts, &l.moe_router, &l.moe_experts, &l.moe_shared, &l.moe_shared_down,
                    &l.moe_shared_gate, &l.linear.in_proj, &l.linear.out_proj})
    f(*m);
}
template <typename T, typename Matrix, typename F>
void for_each_matrix(ModelViews<T, Matrix>& v, F&& f) {
  f(v.lm_head);
  for (LayerViews<T, Matrix>& l : v.layers) for_each_matrix(l, f);
}

}  // namespace gatedlm::model
