#pragma once
// What one block hands out and takes in besides its weights: the probes' read-only views
// of its tensors (analysis/), and the incremental path's hand-offs (infer/: the attention
// over a KV cache the caller keeps, the recurrent state of a linear-attention layer).
// Apart from model.h so that the mixers (mixer.h) and the model's state (model_state.h)
// see these types without seeing Model<T>, which uses both.
#include <cstdint>
#include <functional>

#include "model/gated_deltanet.h"

namespace gatedlm::model {

template <typename T>
struct SwitchHeadsState;  // switch_heads.h: one block's routing

// Read-only views of one block's tensors from the last forward, for the probes of
// analysis/ (n = batch*seq tokens; null where the config has no such tensor).
template <typename T>
struct BlockProbe {
  const T* resid_out = nullptr;  // [n, d_model] residual stream after the block (both adds)
  // The layer's mixer fills what its kind captures (layer_kinds.h's LayerCaptures):
  const T* q_roped = nullptr;     // [n, n_heads * head_dim] queries after QK-norm and RoPE
  const T* k_roped = nullptr;     // [n, n_kv_heads * head_dim] keys after QK-norm and RoPE
  const T* sdpa_out = nullptr;    // [n, n_heads * head_dim] SDPA output after sdpa_transform (Y of G1)
  const T* gate_y = nullptr;      // [n, gate target size] Y at the gate's position, before the gate
  const T* gate_y_out = nullptr;  // [n, gate target size] Y' after the gate
  const T* gate_score = nullptr;  // [n, gate target size] effective score applied to each element
  const SwitchHeadsState<T>* switch_heads = nullptr;  // routing of the switch heads, or null
  // A linear-attention layer's tensors (beta, g, SiLU(z) ...; the attention fields above are
  // null there), or null for a softmax layer.
  const DeltaNetActivations<T>* linear = nullptr;
};

// One block's attention in the incremental path (infer/): the block hands over the
// inputs of its attention for n tokens of any sequences and the caller, who keeps the
// KV cache, writes the output. Rows are tokens in the order given to forward_tokens.
template <typename T>
struct AttentionCall {
  int64_t layer, n;
  const T* q;           // [n, n_heads * head_dim] after QK-norm and RoPE (at each row's position)
  const T* k;           // [n, n_kv_heads * head_dim] after QK-norm and RoPE
  const T* v;           // [n, n_kv_heads * head_dim] after the value gate (if any)
  const T* gate_score;  // [n, n_heads * head_dim] the G1 multiply gate's scores, or null
  T* out;               // [n, n_heads * head_dim] to write: SDPA output Y
  T* gated_out;         // [n, n_heads * head_dim] to write when gate_score is given: Y * gate_score
  const T* sinks = nullptr;  // [n_heads] the layer's learned sink logits (attention_sinks), or null
};
template <typename T>
using AttentionFn = std::function<void(const AttentionCall<T>&)>;

// The incremental path's recurrent state of a hybrid model's linear-attention layers: the
// caller keeps one state per layer and sequence (infer/recurrent_state.h) and returns the
// state of the sequence that a row belongs to. The model groups consecutive rows of one
// sequence (same state, consecutive positions) into runs; a run at position 0 starts fresh.
template <typename T>
using LinearStateFn = std::function<DeltaNetState<T>(int64_t layer, int64_t row)>;

}  // namespace gatedlm::model
