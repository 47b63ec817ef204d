#pragma once
// Softmax attention ("full_attention"), the paper's mixer with every gate variant, switch heads
// and the attention biases, as a Mixer (model/mixer.h):
//
//   inputs:  a.h -> q|k|v(|gate) product -> gates on q/k/v -> QK-norm, RoPE     (attention_forward.cpp)
//   SDPA:    causal softmax attention over a.qr, a.kr, v (or the caller's KV cache in decode)
//   outputs: sdpa_transform -> gate at sdpa or dense -> o_proj -> the branch output
//
// and the same parts in reverse (attention_backward.cpp). Its registry row, parameters,
// buffers and probes: mixer_attention.cpp. The SDPA step is a virtual function of its own so
// that a kind that changes only which keys a query sees (sliding windows) can derive from
// this class and replace that step alone.
#include "kernels/attention.h"
#include "model/mixer.h"

namespace gatedlm::model {

template <typename T>
class AttentionMixer : public Mixer<T> {
 public:
  void resize(LayerActivations<T>& a, int64_t n, const ModelConfig& c) const override;
  void check_layout(int64_t layer, const ModelConfig& c, const LayerWeights<T>& w, const ParamLayout& layout,
                    const T* base) const override;
  const T* forward(const MixerPass<T>& p) const override;
  void backward(const MixerPass<T>& p, const T* d_branch) const override;
  void probe(BlockProbe<T>& out, const LayerActivations<T>& a, const ModelConfig& c) const override;
  bool attention_probs(T* probs, const LayerActivations<T>& a, const LayerWeights<T>& w, const ModelConfig& c,
                       int64_t batch, int64_t seq, int64_t b) const override;

 protected:
  // Y = softmax(q k^T / sqrt(D)) v into a.y0 (with the G1 multiply gate in the kernel's
  // epilogue: Y' into a.gated), over a.qr, a.kr and v_in; in decode, the caller's attention.
  virtual void sdpa_forward(const MixerPass<T>& p, const T* v_in) const;
  // hook_pattern after a training-shaped SDPA (attention_forward.cpp).
  void hook_pattern(const MixerPass<T>& p, const T* v_in) const;
  // hook_z's gradient from outputs_backward's dy (attention_backward.cpp).
  void report_z_gradient(const MixerPass<T>& p, const T* dy) const;
  // From dy (d loss / d Y, or d Y' with the epilogue gate): s.dq2, s.dk0 (RoPE undone) and s.dv0.
  virtual void sdpa_backward(const MixerPass<T>& p, const T* dy) const;
  // The keys a query sees in the training-shaped kernels: the last window() (0: all); in
  // decode the caller's cache decides (the row's kv_window). Sliding-window layers override it.
  virtual int64_t window(const ModelConfig&) const { return 0; }
  // The kernels' shape of a training-shaped pass of batch x seq tokens.
  kernels::AttentionShape sdpa_shape(const ModelConfig& c, int64_t batch, int64_t seq) const;

 private:
  void inputs_forward(const MixerPass<T>& p) const;
  const T* outputs_forward(const MixerPass<T>& p) const;
  const T* outputs_backward(const MixerPass<T>& p, const T* d_branch) const;
  void inputs_backward(const MixerPass<T>& p) const;
};

// The registry row of "full_attention" (builtin_layer_kinds.cpp lists it), and its parameters (Hugging
// Face Qwen3's self_attn.* names), for kinds that keep the same tensors.
LayerKindSpec attention_layer_kind();
void add_attention_params(LayerParams& p, const ModelConfig& c);

}  // namespace gatedlm::model
