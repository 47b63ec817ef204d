#pragma once
// Model<T>'s private state and the helpers that model.cpp, the block loop
// (block_forward.cpp, block_backward.cpp) and the mixers (mixer*.h) share: the saved
// activations of each block, the backward scratch, and where the fused q|k|v(|gate) product
// keeps its column blocks. Only model/*.cpp (and tests of the mixers) include this file.
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "model/gate.h"
#include "model/gated_deltanet.h"
#include "model/hooks.h"
#include "model/block_io.h"
#include "model/param_layout.h"
#include "model/moe.h"
#include "model/switch_heads.h"

namespace gatedlm::model {

// Saved tensors of one block for n = batch*seq tokens. Shapes in comments; a buffer
// that the config does not need stays empty.
template <typename T>
struct LayerActivations {
  std::vector<T> rstd_attn;        // [n]
  std::vector<T> h;                // [n, d]  rmsnorm(x): q/k/v and gate input
  std::vector<T> q0, k0, v0;       // [n, q_dim], [n, kv_dim] x2: projection outputs
  std::vector<T> gate_pre;         // [n, gate_out] gate projection (before the activation)
  std::vector<T> gate_score;       // [n, gate target size]
  std::vector<T> gated;            // gate output at whichever position the gate sits
  std::vector<T> qr, kr;           // [n, q_dim], [n, kv_dim]: after QK-norm and RoPE
  std::vector<T> rstd_q, rstd_k;   // [n*n_q], [n*n_kv]
  std::vector<T> y0;               // [n, q_dim] SDPA output
  std::vector<T> lse;              // [batch, n_q, seq]
  std::vector<T> y1, rstd_y;       // after sdpa_transform ([n, q_dim], [n*n_q])
  std::vector<T> o0;               // [n, d] o_proj output
  std::vector<T> o2, rstd_o;       // after the sandwich norm
  std::vector<T> mid;              // [n, d] residual after the attention branch
  std::vector<T> rstd_ffn, h2;     // [n], [n, d]
  std::vector<T> fgu;              // [n, 2 * ffn]: gate_proj | up_proj outputs, one product
  std::vector<T> fa;               // [n, ffn] SwiGLU output
  std::vector<T> f0, f1, rstd_f;   // [n, d] down_proj output, after sandwich norm
  SwitchHeadsState<T> sw;          // switch heads: routing and expert outputs (k0/v0 come from them)
  // Linear-attention layers (model/gated_deltanet.h) keep rstd_attn, h, o0 (the token mixer's
  // output), the sandwich norm, mid and the FFN's tensors above, and these instead of the
  // attention's.
  DeltaNetActivations<T> lin;
  // The mixer's output [n, d] of the last forward (into one of the buffers above), the input
  // of the branch's end; backward reads it again.
  const T* branch = nullptr;
};

// Model<T>'s State: what a pass keeps, shared by the block loop and the mixers (model/mixer.h).
template <typename T>
struct ModelState {
  int64_t batch = 0, seq = 0, n = 0;
  bool for_backward = false;  // whether the buffers below include backward's
  std::vector<int32_t> tokens, targets;
  std::vector<int32_t> positions;  // [n] RoPE position of each row (forward_tokens); empty: t of [batch, seq]
  std::vector<std::vector<T>> resid;  // [n_layers + 1][n, d]: input of block l, last = output
  // [n_layers] in a pass that backward follows; [1] in forward_tokens, which keeps no block's
  // tensors past the block: one set, sized for every layer, serves each in turn (at 1900
  // tokens of the 1B shape, 250 MB instead of 16 x 250 MB). acts(l) is layer l's.
  std::vector<LayerActivations<T>> layers;
  LayerActivations<T>& acts(int64_t l) { return layers.size() == 1 ? layers[0] : layers[l]; }
  std::vector<std::unique_ptr<MoeBlock<T>>> moe;  // [n_layers]: the MoE FFN of each MoE layer, null elsewhere
  std::vector<double> balance_counts;  // [moe_layers * E] loads f_i counts over (set_balance_counts); empty: own
  bool routed_only = false;            // the last pass was route_counts (nothing for backward)
  std::vector<T> rstd_final, h_final, logits, losses, dlogits;
  std::vector<T> qkvg;  // [n, qkv_width]: the fused q|k|v(|gate) product, split into the layer's q0, k0, ...
  // Backward scratch, reused by every block.
  std::vector<T> dres, dh, da, db, dc, dq0, dq1, dq2, dk0, dk1, dk2, dv0, dv1, dfa, dfgu, dgate, dscore, dqkvg;
  SwitchHeadsScratch<T> sw_scratch;
  DeltaNetScratch<T> lin_scratch;
  DeltaNetTimes lin_times;  // the linear layers' parts, summed over layers (Model::deltanet_times)
  // The activation hooks of this pass (hooks.h; none in forward_tokens), and why the backward
  // of this forward is refused (a hook changed what the attention kernels saved), or "".
  HookCaller<T> hooks;
  std::string backward_refused;
  bool seeded_logits = false;  // backward_from_logits: the MoE blocks' auxiliary losses add nothing
};

namespace detail {

template <typename T>
void zero(std::vector<T>& v) {
  std::fill(v.begin(), v.end(), T(0));
}

// The shape of a hybrid model's Gated DeltaNet layers and a layer's weights / gradients in
// that layer's terms.
inline DeltaNetShape deltanet_shape(const ModelConfig& c) { return {c.linear_attention, c.d_model, c.norm_eps}; }
template <typename T>
DeltaNetWeights<T> deltanet_weights(const LayerWeights<T>& w) {
  const LinearAttentionWeights<T>& v = w.linear;
  return {v.in_proj, v.conv, v.dt_bias, v.A_log, v.norm, v.out_proj};
}
template <typename T>
DeltaNetGrads<T> deltanet_grads(const LayerViews<T>& g) {
  const LinearAttentionViews<T>& v = g.linear;
  return {v.in_proj, v.conv, v.dt_bias, v.A_log, v.norm, v.out_proj};
}

// The attention's input projections are one product h [n, d] x [Wq; Wk; Wv; Wgate]^T
// (the layout keeps those rows adjacent). The gate joins it when it reads all of h.
inline bool gate_in_qkv_product(const ModelConfig& c) {
  return c.has_gate() && c.gate.input == GateInput::hidden && c.gate_in() == c.d_model;
}
// The multiply gate right after SDPA (G1) runs inside the attention kernels: the forward's
// epilogue writes Y' = Y * score, the backward reads dO = dY' * score and writes dscore.
inline bool gate_in_attention_epilogue(const ModelConfig& c) {
  return c.gate.position == GatePosition::sdpa && c.gate.combine == GateCombine::multiply &&
         c.sdpa_transform == SdpaTransform::none;
}
// Whether each layer keeps a copy of the gate's pre-activations: not when they sit in the
// fused product (forward reads them there in place) and backward can work from the score.
inline bool keeps_gate_pre(const ModelConfig& c) {
  return c.has_gate() && !(gate_in_qkv_product(c) && gate_grad_from_score(GateShape::of(c)));
}
// Switch heads compute k (experts_on kv) and v from their experts: those leave the product.
inline int64_t k_product_width(const ModelConfig& c) { return c.switch_heads.switches_k() ? 0 : c.kv_dim(); }
inline int64_t v_product_width(const ModelConfig& c) { return c.switch_heads.on() ? 0 : c.kv_dim(); }
// The first column of the gate's pre-activations in the fused product.
inline int64_t gate_product_column(const ModelConfig& c) { return c.q_dim() + k_product_width(c) + v_product_width(c); }
inline int64_t qkv_width(const ModelConfig& c) {
  return gate_product_column(c) + (gate_in_qkv_product(c) ? c.gate_out() : 0);
}
template <typename T>
SwitchHeadsWeights<T> switch_weights(const LayerWeights<T>& w) {
  return {w.switch_router, w.k_experts, w.v_experts};
}

// A block of columns of a row-major [n, ld] matrix and its packed [n, width] copy.
template <typename T>
struct ColumnBlock {
  T* packed;  // null: skip the block's columns
  int64_t width;
};

}  // namespace detail

}  // namespace gatedlm::model
