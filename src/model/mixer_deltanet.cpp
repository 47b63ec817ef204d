// Gated DeltaNet's registry row, parameters and pass (mixer_deltanet.h; the computation:
// gated_deltanet.cpp, gated_deltanet_backward.cpp).
#include "model/mixer_deltanet.h"

#include "core/error.h"

namespace gatedlm::model {

using namespace detail;

namespace {

// Qwen3.5's names and shapes (model/gated_deltanet.h). The four input projections are
// adjacent, so that qkv|z|b|a is one [in_width, d] matrix and one product.
void add_deltanet_params(LayerParams& p, const ModelConfig& c) {
  const LinearAttentionConfig& la = c.linear_attention;
  const int64_t d = c.d_model;
  p.add("linear_attn.in_proj_qkv.weight", {la.conv_dim(), d}, ParamKind::matrix);
  p.add("linear_attn.in_proj_z.weight", {la.value_dim(), d}, ParamKind::matrix);
  p.add("linear_attn.in_proj_b.weight", {la.n_v_heads, d}, ParamKind::matrix);
  p.add("linear_attn.in_proj_a.weight", {la.n_v_heads, d}, ParamKind::matrix);
  p.add("linear_attn.conv1d.weight", {la.conv_dim(), 1, la.conv_kernel}, ParamKind::conv);
  p.add("linear_attn.dt_bias", {la.n_v_heads}, ParamKind::decay);
  p.add("linear_attn.A_log", {la.n_v_heads}, ParamKind::decay);
  p.add("linear_attn.norm.weight", {la.v_head_dim}, ParamKind::linear_norm);
  p.add("linear_attn.out_proj.weight", {d, la.value_dim()}, ParamKind::matrix);
}

const Mixer<float>& deltanet_mixer_float() {
  static const DeltaNetMixer<float> mixer;
  return mixer;
}
const Mixer<double>& deltanet_mixer_double() {
  static const DeltaNetMixer<double> mixer;
  return mixer;
}

// forward_tokens' rows as runs of one sequence each: consecutive rows with the same state
// and consecutive positions; a run at position 0 starts fresh.
template <typename T>
std::vector<DeltaNetRun<T>> linear_runs(const MixerPass<T>& p) {
  const ModelState<T>& s = p.s;
  if (!p.linear_state || !*p.linear_state)
    fail("forward_tokens: a hybrid model needs the recurrent state of its linear-attention layers");
  std::vector<DeltaNetRun<T>> runs;
  for (int64_t r = 0; r < s.n; ++r) {
    const DeltaNetState<T> state = (*p.linear_state)(p.layer, r);
    DeltaNetRun<T>* last = runs.empty() ? nullptr : &runs.back();
    if (last && last->state.delta == state.delta && s.positions[r] == s.positions[r - 1] + 1) {
      ++last->count;
    } else {
      runs.push_back({r, 1, state, s.positions[r] == 0});
    }
  }
  return runs;
}

}  // namespace

LayerKindSpec deltanet_layer_kind() {
  return {LayerKind::linear_attention,
          "linear_attention",
          DecodeStateKind::recurrent,
          LayerCaptures{.attention_probs = false, .sdpa_output = false, .recurrent_state = true},
          add_deltanet_params,
          deltanet_mixer_float,
          deltanet_mixer_double};
}

template <typename T>
void DeltaNetMixer<T>::resize(LayerActivations<T>& a, int64_t n, const ModelConfig& c) const {
  a.lin.resize(n, c.linear_attention);
}

// in_proj_qkv|z|b|a are one matrix of one product.
template <typename T>
void DeltaNetMixer<T>::check_layout(int64_t layer, const ModelConfig& c, const LayerWeights<T>& w,
                                    const ParamLayout& layout, const T* base) const {
  const ParamSpec& a = layout.at(layer_param(layer, "linear_attn.in_proj_a.weight"));
  if (base + a.offset + a.numel != w.linear.in_proj.values + c.linear_attention.in_width() * c.d_model)
    fail("internal error: the parameter layout does not keep the linear layer's input projections adjacent");
}

template <typename T>
const T* DeltaNetMixer<T>::forward(const MixerPass<T>& p) const {
  ModelState<T>& s = p.s;
  LayerActivations<T>& a = p.a;
  if (s.positions.empty()) {
    deltanet_forward(a.o0.data(), a.h.data(), s.batch, s.seq, deltanet_shape(p.c), deltanet_weights(p.w), a.lin,
                     &s.lin_times, s.hooks, p.layer);
  } else {
    const std::vector<DeltaNetRun<T>> runs = linear_runs(p);
    deltanet_forward_runs<T>(a.o0.data(), a.h.data(), s.n, runs, deltanet_shape(p.c), deltanet_weights(p.w), a.lin);
  }
  return a.o0.data();
}

template <typename T>
void DeltaNetMixer<T>::backward(const MixerPass<T>& p, const T* d_branch) const {
  ModelState<T>& s = p.s;
  deltanet_backward(s.dh.data(), deltanet_grads(*p.g), d_branch, p.a.h.data(), s.batch, s.seq, deltanet_shape(p.c),
                    deltanet_weights(p.w), p.a.lin, s.lin_scratch, &s.lin_times);
}

template <typename T>
void DeltaNetMixer<T>::probe(BlockProbe<T>& out, const LayerActivations<T>& a, const ModelConfig&) const {
  out.linear = &a.lin;
}

template class DeltaNetMixer<float>;
template class DeltaNetMixer<double>;

}  // namespace gatedlm::model
