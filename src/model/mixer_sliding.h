#pragma once
// Sliding-window attention ("sliding_attention" in Hugging Face's layer_types; gpt-oss, Gemma,
// Step-3.5 and AFMoE alternate it with full layers): softmax attention whose query t sees
// only the keys t - W < j <= t, W = the config's sliding_window. It keeps attention's tensors
// (self_attn.*), its gates, sinks, biases and probes; only the window differs:
//   - training-shaped passes: the fused kernels with AttentionShape::window = W;
//   - decode: the row's kv_window = W, so the decoder keeps W rows per sequence for these
//     layers (a ring, infer/kv_cache.h) and attends over what it keeps.
#include "model/mixer_attention.h"

namespace gatedlm::model {

template <typename T>
class SlidingAttentionMixer : public AttentionMixer<T> {
 protected:
  int64_t window(const ModelConfig& c) const override { return c.sliding_window; }
};

// The registry row of "sliding_attention" (builtin_layer_kinds.cpp lists it).
LayerKindSpec sliding_attention_layer_kind();

}  // namespace gatedlm::model
