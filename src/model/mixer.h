#pragma once
// The token mixer of one layer kind, as the block loop (block_forward.cpp, block_backward.cpp)
// and Model<T> call it. A block is
//
//   h = input_norm(resid[l]);  branch = mixer.forward(h);  mid = resid[l] + clip(sandwich(branch))
//   then the FFN
//
// and the block loop owns everything but the middle step: the input norm, the branch's end,
// the FFN. Each kind implements its Mixer in its own files (mixer_attention.h,
// mixer_deltanet.h) and registers it in its LayerKindSpec (layer_kinds.h). Mixers are
// stateless: what a pass keeps lives in the model's State (model_state.h), which the pass
// hands over. One virtual call per layer and pass; the work inside is the kind's own.
// Only model/*.cpp and tests include this file.
#include <cstdint>
#include <type_traits>

#include "kernels/rope.h"
#include "model/layer_kinds.h"
#include "model/model_state.h"

namespace gatedlm::model {

// One layer's pass as its mixer sees it (n = s.n rows: batch * seq tokens, or forward_tokens' rows).
template <typename T>
struct MixerPass {
  int64_t layer;
  const ModelConfig& c;
  ModelState<T>& s;          // the shared scratch (backward's d* buffers, the fused product qkvg ...)
  LayerActivations<T>& a;    // s.layers[layer]; a.h [n, d] holds the normed input
  const LayerWeights<T>& w;  // the layer's weights
  const LayerViews<T>* g;    // its gradients (backward only; null in a forward)
  const kernels::RopeTable& rope;
  // forward_tokens only (null in a training-shaped pass): the decode hand-offs of model.h,
  // each used by the kinds whose decode_state asks for it.
  const AttentionFn<T>* attend;           // kv_cache kinds
  const LinearStateFn<T>* linear_state;   // recurrent kinds
};

template <typename T>
class Mixer {
 public:
  virtual ~Mixer() = default;
  // Sizes the layer's saved tensors for n rows (buffers it does not use stay empty).
  virtual void resize(LayerActivations<T>& a, int64_t n, const ModelConfig& c) const = 0;
  // Throws when the layout does not keep a fused product's weights adjacent (checked once, by
  // the Model's constructor). base: the start of the parameter buffer.
  virtual void check_layout(int64_t layer, const ModelConfig& c, const LayerWeights<T>& w, const ParamLayout& layout,
                            const T* base) const = 0;
  // a.h [n, d] -> the branch output [n, d], a pointer into p.a valid until the next forward.
  virtual const T* forward(const MixerPass<T>& p) const = 0;
  // d loss / d branch [n, d] -> writes p.s.dh (d loss / d h, [n, d]) and accumulates the
  // gradients of the mixer's weights into *p.g. Follows the last forward of the same layer.
  virtual void backward(const MixerPass<T>& p, const T* d_branch) const = 0;
  // The probe fields of this kind (block_io.h's BlockProbe; what captures promises).
  virtual void probe(BlockProbe<T>& out, const LayerActivations<T>& a, const ModelConfig& c) const = 0;
  // Softmax probabilities of batch row b of the last training-shaped forward [n_heads, seq,
  // seq]; false (nothing written) for a kind without them.
  virtual bool attention_probs(T* probs, const LayerActivations<T>& a, const LayerWeights<T>& w,
                               const ModelConfig& c, int64_t batch, int64_t seq, int64_t b) const = 0;
};

// The mixer of a model's layer.
template <typename T>
const Mixer<T>& layer_mixer(const ModelConfig& c, int64_t layer) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  const LayerKindSpec& spec = layer_spec(c, layer);
  if constexpr (std::is_same_v<T, float>)
    return spec.mixer_float();
  else
    return spec.mixer_double();
}

}  // namespace gatedlm::model
