#pragma once
// The mixture-of-experts FFN of one layer (config: model/moe_config.h), forward and
// backward written by hand.
//
// Forward, for n tokens h [n, d]:
//   z = h R^T [n, E] (router logits), p = softmax(z);
//   the top-k experts of each token by z (equivalently by p); on equal logits the lower
//   expert index wins, so the choice is deterministic;
//   weights w_j = p_j, or p_j / sum of the k chosen p with norm_topk_prob;
//   y = sum_j w_j E_j(h) + sigmoid(h g^T) S(h)  (S, g: the shared expert and its gate),
//   E_j, S: SwiGLU experts down(silu(gate h) * up h).
// Tokens are grouped per expert (a counting sort that keeps token order), each expert runs
// one gate|up product and one down product over its own rows only (an expert without
// tokens runs nothing; the row count is rounded up with zero rows to one of a few sizes,
// moe.cpp padded_rows), and each token then sums its k rows (per token, so the result
// does not depend on thread timing). When the loads are even enough (every expert padded
// to the largest count wastes at most half the rows) all experts run as one batched
// product per step of the expert instead (kernels/matmul.h, batched_matmul): on small products
// the threads' start and synchronisation cost more than the arithmetic.
//
// Auxiliary losses of the layer (both reach only the router):
//   load balance  LB = E * sum_i f_i P_i with f_i = c_i / sum_j c_j, the share of the
//                 token->expert assignments that went to expert i, counted over the
//                 balance scope (a constant: no gradient), and P_i the mean of p_i over this
//                 forward's n tokens. LB = 1 when both are uniform (Switch Transformer).
//   router z-loss Z = mean over the n tokens of (logsumexp_j z_j)^2 (ST-MoE).
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "kernels/weight.h"
#include "model/config.h"

namespace gatedlm::model {

template <typename T>
struct MoeWeights {
  kernels::Weight<T> router, experts, shared, shared_down, shared_gate;  // param_layout.h's LayerWeights
};
template <typename T>
struct MoeGrads {
  T *router, *experts, *shared, *shared_down, *shared_gate;
};

// Seconds spent in the parts of the block since the last reset (forward and backward):
// routing = router product, softmax, top-k and the grouping (counting sort); permute =
// gathering rows per expert and combining them back per token (and their backward);
// experts = the experts' products and SwiGLU; shared = the shared expert and its gate.
struct MoeTimes {
  double routing = 0, permute = 0, experts = 0, shared = 0;
};

// The auxiliary losses of one forward, averaged over the MoE layers, and what backward
// adds to the loss: lb_coef * lb + z_coef * z.
struct MoeAuxLosses {
  double lb = 0, z = 0, total = 0;
};

template <typename T>
class MoeBlock {
 public:
  MoeBlock(const MoeConfig& moe, int64_t d_model);

  // y [n, d] (overwritten) = the block applied to h [n, d]. With keep, saves what
  // backward needs (h itself stays the caller's and must be passed to backward).
  void forward(T* y, const T* h, int64_t n, const MoeWeights<T>& w, bool keep);
  // Called with the router's logits [n, n_experts] before the softmax and the top-k (the
  // activation hook blocks.{l}.mlp.hook_router, model/hooks.h): what it leaves is what routes.
  // Empty: none (the default).
  void set_router_hook(std::function<void(T* logits, int64_t n)> hook) { router_hook_ = std::move(hook); }
  // dh [n, d] (overwritten) = d loss / d h; parameter gradients are added into g.
  // dy [n, d] = d loss / d y; lb_weight [E] = d loss / d P_i; z_weight = d loss / d Z.
  void backward(T* dh, const MoeGrads<T>& g, const T* dy, const T* h, const MoeWeights<T>& w,
                std::span<const double> lb_weight, double z_weight);

  std::span<const int64_t> counts() const { return counts_; }   // [E] tokens routed to each expert
  std::span<const double> mean_probs() const { return mean_p_; }  // [E] P_i of the last forward
  double z_loss() const { return z_loss_; }                       // Z of the last forward
  // The k experts chosen for each token of the last forward [n * k], best first.
  std::span<const int32_t> chosen() const { return chosen_; }
  MoeTimes& times() { return times_; }
  // Whether the last forward ran the experts as one batched product (see above).
  bool batched() const { return uniform_; }

 private:
  std::function<void(T*, int64_t)> router_hook_;
  void route(const T* h, int64_t n, const MoeWeights<T>& w);
  void group();
  // backward's parts, in its order (moe.cpp).
  void combine_backward(T* dweight, const T* dy);
  void experts_backward(const MoeGrads<T>& g, const MoeWeights<T>& w);
  void gather_backward(T* dh);
  void shared_backward(T* dh, const MoeGrads<T>& g, const T* dy, const T* h, const MoeWeights<T>& w);
  void router_backward(T* dh, const MoeGrads<T>& g, const T* h, const MoeWeights<T>& w, const T* dweight,
                       std::span<const double> lb_weight, double z_weight);

  MoeConfig c_;
  int64_t d_, n_ = 0;
  // Routing of the last forward.
  std::vector<T> logits_, probs_, lse_;   // [n, E], [n, E], [n]
  std::vector<int32_t> chosen_;           // [n * k] expert of token t's slot j at t * k + j
  std::vector<T> weight_;                 // [n * k] w_j
  std::vector<int64_t> counts_, offsets_; // [E], [E + 1]: expert e's rows are offsets[e]..offsets[e+1]
                                          // (its counts_[e] tokens, then zero padding rows)
  int64_t rows_ = 0;                      // grouped rows, padding included (>= n * k)
  bool uniform_ = false;                  // every segment has the same rows: batched products
  std::vector<int64_t> row_of_;           // [n * k] row of (t, j) in the grouped buffers
  std::vector<int64_t> token_of_;         // [rows_] token of each grouped row, -1 for padding
  std::vector<double> mean_p_;            // [E]
  double z_loss_ = 0;
  // Grouped activations [rows_, ...] and the shared expert's [n, ...].
  std::vector<T> x_, gu_, act_, out_;     // inputs [., d], gate|up [., 2f], SwiGLU [., f], outputs [., d]
  std::vector<T> sgu_, sact_, sout_, sgate_;  // shared: [n, 2fs], [n, fs], [n, d], sigmoid score [n]
  // Backward scratch.
  std::vector<T> dout_, dact_, dgu_, dx_, dz_, dsact_, dsgu_, dsout_;
  MoeTimes times_;
};

}  // namespace gatedlm::model
