#pragma once
// The decoder: embedding, n_layers blocks of
//   x += attn(rmsnorm(x));  x += swiglu_ffn(rmsnorm(x))
// then a final RMSNorm and the LM head. Forward saves what backward needs; backward
// accumulates parameter gradients into grads(). T is float for training and double for
// the finite-difference gradient checks.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "core/zeroed_allocator.h"
#include "kernels/rope.h"
#include "model/block_io.h"
#include "model/config.h"
#include "model/gated_deltanet.h"
#include "model/hooks.h"
#include "model/moe.h"
#include "model/param_layout.h"

namespace gatedlm::model {

template <typename T>
struct LayerActivations;  // model_state.h: the saved tensors of one block
template <typename T>
struct ModelState;  // model_state.h: what a pass keeps
template <typename T>
struct MixerPass;  // mixer.h: one layer's pass as its mixer sees it
template <typename T>
class Mixer;  // mixer.h: the token mixer of a layer kind

template <typename T>
class Model {
 public:
  explicit Model(const ModelConfig& config);
  ~Model();
  Model(Model&&) noexcept;

  const ModelConfig& config() const { return config_; }
  const ParamLayout& layout() const { return layout_; }
  // Views of the flat buffers laid out by layout(); the buffers never move, so the
  // per-tensor views stay valid for the model's life.
  std::span<T> params() { return params_; }
  std::span<const T> params() const { return params_; }
  // The gradient buffer is allocated on first use (grads(), zero_grads(), backward()), so
  // a model that only runs forward (score, eval, analyze) holds one copy of the weights.
  std::span<T> grads() {
    ensure_grads();
    return grads_;
  }
  // Copies weights in (size checked against the layout).
  void load_params(std::span<const T> values);
  void zero_grads();
  // The weights' stored forms (kernels/weight.h): every matrix view of the weights asks
  // `store` once for its stored rows, and the forward products read those from then on (the
  // embedding lookup expands its rows from them); null goes back to the fp32 values. Float models only. The store must outlive the
  // attachment (model/quantized_weights.h attaches and detaches itself).
  void attach_weight_store(const kernels::WeightStore* store);
  // Mixed precision: bf16 matrix products (fp32 accumulation, weights and grads stay fp32).
  void set_bf16_matmuls(bool on) { bf16_matmuls_ = on; }
  bool bf16_matmuls() const { return bf16_matmuls_; }

  // tokens, targets [batch, seq]; a negative target contributes no loss. Returns the mean
  // loss over counted targets (0 when targets is null: logits only).
  double forward(const int32_t* tokens, const int32_t* targets, int64_t batch, int64_t seq);
  // Accumulates into grads() the gradient of the mean loss of the last forward.
  void backward();
  // The same for a loss whose gradient with respect to the logits of the last forward is
  // dlogits [batch * seq, vocab] (a chosen logit: one 1); the MoE auxiliary losses add nothing.
  void backward_from_logits(std::span<const T> dlogits);
  // Activation hooks (hooks.h) for the training-shaped passes that follow (forward, backward,
  // route_counts); null removes them. The caller keeps *hooks alive while they are set.
  void set_hooks(ActivationHooks<T>* hooks) { hooks_ = hooks; }
  ActivationHooks<T>* hooks() const { return hooks_; }

  // The same blocks run incrementally (infer/): n tokens of any sequences, token r at
  // RoPE position positions[r], each block's attention supplied by `attend`. Writes the
  // logits of the rows listed in logit_rows (every row when empty), in that order, to
  // logits() [logit_rows, vocab]. Keeps nothing for backward.
  // Hybrid models need linear_state for their linear-attention layers.
  void forward_tokens(const int32_t* tokens, const int32_t* positions, int64_t n, const AttentionFn<T>& attend,
                      std::span<const int64_t> logit_rows = {}, const LinearStateFn<T>& linear_state = {});

  const T* logits() const;          // [batch * seq, vocab] of the last forward
  const T* token_losses() const;    // [batch * seq]: -log p(target), 0 where ignored
  int64_t counted_targets() const { return counted_; }
  int64_t batch() const;
  int64_t seq() const;
  BlockProbe<T> probe(int64_t layer) const;
  // Softmax probabilities of a layer for batch row b of the last forward, probs [n_heads, seq,
  // seq] (zero above the diagonal); false, nothing written, for a layer whose kind has none
  // (layer_kinds.h: captures.attention_probs).
  bool attention_probs(T* probs, int64_t layer, int64_t b) const;
  const kernels::RopeTable& rope() const { return rope_; }

  // Mixture of experts (model/moe.h; all empty or zero without MoE).
  // The auxiliary losses of the last forward, averaged over the MoE layers; backward()
  // adds the gradient of their weighted sum (total) to that of the mean cross-entropy,
  // which forward() returns alone.
  MoeAuxLosses moe_aux() const;
  // Tokens routed to each expert in the last forward, [moe_layers * n_experts].
  std::vector<int64_t> expert_counts() const;
  // The loads f_i of the balance loss count these assignments [moe_layers * n_experts]
  // (the optimizer step's over all micro-batches and ranks, lb_scope global) instead of
  // the last forward's own; an empty span goes back to the forward's own.
  void set_balance_counts(std::span<const double> counts);
  // Runs the blocks up to the last MoE layer (no loss, nothing for backward) and returns
  // expert_counts(): the counting pass of the global load balance (train/moe_balance.h).
  std::vector<int64_t> route_counts(const int32_t* tokens, int64_t batch, int64_t seq);
  // Seconds in the MoE blocks' parts since the last reset, summed over layers.
  MoeTimes moe_times(bool reset = false);
  // Seconds in the Gated DeltaNet layers' parts since the last reset, summed over layers.
  DeltaNetTimes deltanet_times(bool reset = false);
  // The MoE block of a layer (null for a dense layer), for the probes of analysis/.
  const MoeBlock<T>* moe_block(int64_t layer) const;

 private:
  void begin_forward(int64_t batch, int64_t seq);
  std::vector<double> balance_shares(int64_t moe_index) const;
  void ensure_buffers(int64_t batch, int64_t seq, bool for_backward);
  void ensure_grads();
  void embed(const int32_t* tokens);
  void final_logits(std::span<const int64_t> rows);
  // One block (block_forward.cpp, block_backward.cpp): the input norm, the layer's mixer
  // (mixer.h), the branch's end, the FFN.
  MixerPass<T> mixer_pass(int64_t l, const AttentionFn<T>* attend, bool for_backward);
  void block_forward(int64_t l, const AttentionFn<T>* attend);
  void branch_output_forward(int64_t l, const T* branch);
  const T* branch_output_backward(int64_t l, const T* branch);
  void redirect_zero_centered_norms();
  void refresh_zero_centered_norms();
  void ffn_forward(int64_t l);
  void block_backward(int64_t l);
  void ffn_backward(int64_t l);
  void backward_from_seed();

  ModelConfig config_;
  ParamLayout layout_;
  ZeroedVector<T> params_;  // pages only where written (core/zeroed_allocator.h)
  std::vector<T> grads_;
  ModelWeights<T> w_;  // what the products read (kernels/weight.h)
  kernels::Weight<T> embed_rows_;  // the embedding as its store holds it (attach_weight_store)
  ModelViews<T> g_;
  kernels::RopeTable rope_;
  const LinearStateFn<T>* linear_state_ = nullptr;  // during forward_tokens
  // Zero-centred norms (config norm_zero_centered): the forward and backward read 1 + w from
  // this copy, which the views of those norms point into (the gradient with respect to w is
  // the one with respect to 1 + w); refreshed at the start of every forward.
  std::vector<T> norm_scales_;
  std::vector<std::pair<int64_t, int64_t>> norm_offsets_;  // (offset in params_, in norm_scales_) per norm
  std::vector<const Mixer<T>*> mixers_;  // [n_layers]: each layer's token mixer (mixer.h)
  using State = ModelState<T>;
  std::unique_ptr<State> s_;
  int64_t counted_ = 0;
  bool bf16_matmuls_ = false;
  ActivationHooks<T>* hooks_ = nullptr;
};

}  // namespace gatedlm::model
