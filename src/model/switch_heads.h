#pragma once
// Switch heads (SwitchHead, Csordás et al. 2024; the paper's Appendix A.1, Table 6): the
// value projection, or the key and value projections, of each KV head as a mixture of
// experts chosen per token by a sigmoid router.
//
// For token t with the attention block's normalised input x_t [d], KV head h, E experts
// and k = top_k:
//   r[t, h, e] = x_t . R[h*E + e]                         router pre-activations, R [H*E, d]
//   S(t, h)    = the k experts with the largest r[t, h, :] (a tie goes to the lower index)
//   v[t, h]    = sum_{e in S(t, h)} sigmoid(r[t, h, e]) * (V_e[h*hd:(h+1)*hd, :] x_t)   [hd]
// where V_e [kv_dim, d] is expert e's value projection (all heads' rows, as v_proj). With
// experts_on kv the keys are computed the same way from the key experts K_e, with the same
// S(t, h) and scores (one router picks both, as SwitchHead's source side does). The scores
// are not renormalised. With E = k = 1 this is v_proj x * sigmoid(x . R[h]): the headwise
// value gate (G2), row (11) of the paper's Table 1.
//
// The selection is a step function of r: no gradient flows through which experts were
// chosen, only through the chosen scores (as in PyTorch's topk + gather).
//
// Computation: the (token, head, choice) triples are grouped per (head, expert); each
// non-empty group is one gathered product [m, d] x [d, hd] (oneDNN for float), so an
// expert is computed only for the tokens that chose it. Backward reuses the grouping.
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/weight.h"
#include "model/config.h"

namespace gatedlm::model {

// The checkpoint tensors of one layer's switch heads, as suffixes of
// "model.layers.{i}.": the router "self_attn.v_router.weight" (experts_on v) or
// "self_attn.kv_router.weight" (kv) [n_kv_heads * n_experts, d_model], row h*E + e scoring
// expert e of KV head h; then "self_attn.k_experts.{e}.weight" (kv only) and
// "self_attn.v_experts.{e}.weight" [n_kv_heads * head_dim, d_model], e = 0..E-1, each laid
// out as k_proj / v_proj. The experts of one kind are adjacent (expert e at e * kv_dim * d).
struct SwitchHeadsTensor {
  std::string suffix;
  std::vector<int64_t> shape;
  bool router;
};
std::vector<SwitchHeadsTensor> switch_heads_tensors(const ModelConfig& c);
std::string switch_router_suffix(const ModelConfig& c);
std::string switch_expert_suffix(char kind, int64_t expert);  // kind 'k' or 'v'

// Parameter counts of the switch heads over all layers (0 when off): the routers, the
// expert projections, and the expert parameters one token uses (k of E per head).
struct SwitchHeadsCounts {
  int64_t router = 0, experts = 0, experts_active = 0;
};
SwitchHeadsCounts switch_heads_counts(const ModelConfig& c);

template <typename T>
struct SwitchHeadsWeights {
  kernels::Weight<T> router;     // [H*E, d]
  kernels::Weight<T> k_experts;  // [E, kv_dim, d]; null unless experts_on kv
  kernels::Weight<T> v_experts;  // [E, kv_dim, d]
};
template <typename T>
struct SwitchHeadsGrads {
  T* router;
  T* k_experts;
  T* v_experts;
};

// What one layer's forward keeps (for backward and for inspection). Selections are
// indexed s = (t * H + h) * k + j, j = 0..k-1 best first.
template <typename T>
struct SwitchHeadsState {
  int64_t n = 0;
  std::vector<T> router_pre;         // [n, H*E]
  std::vector<int32_t> expert;       // [n*H*k] chosen expert of each selection
  std::vector<T> score;              // [n*H*k] its sigmoid score
  std::vector<int64_t> grouped_row;  // [n*H*k] row of each selection in the grouped order
  std::vector<int64_t> group_start;  // [H*E + 1]: group (h, e) holds grouped rows start[h*E+e] ..
  std::vector<int32_t> group_token;  // [n*H*k] token of each grouped row
  std::vector<T> v_out, k_out;       // [n*H*k (+ slack), hd] the expert outputs, grouped order (k_out: kv only)
};

// Buffers shared by every layer's forward and backward.
template <typename T>
struct SwitchHeadsScratch {
  std::vector<T> x, dx;      // [rows of the largest group, d]: gathered inputs and their gradient
  std::vector<T> dpre;       // [n, H*E] router gradient
  std::vector<T> dv, dk;     // [n*H*k (+ slack), hd] gradients of the expert outputs, grouped order
};

// k0 (experts_on kv; else untouched, may be null) and v0 [n, kv_dim] from x [n, d].
template <typename T>
void switch_heads_forward(T* k0, T* v0, SwitchHeadsState<T>& state, SwitchHeadsScratch<T>& scratch, const T* x,
                          int64_t n, const SwitchHeadsWeights<T>& w, const ModelConfig& c);

// dx [n, d] += d loss / d x; gradients accumulated into g; dk0 (kv only) and dv0 [n, kv_dim]
// are d loss / d k0 and d loss / d v0. state is the same layer's forward.
template <typename T>
void switch_heads_backward(T* dx, const SwitchHeadsGrads<T>& g, SwitchHeadsScratch<T>& scratch, const T* dk0,
                           const T* dv0, const T* x, const SwitchHeadsState<T>& state,
                           const SwitchHeadsWeights<T>& w, const ModelConfig& c);

}  // namespace gatedlm::model
