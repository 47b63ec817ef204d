// Softmax attention's registry row, parameters, buffers, layout check and probes
// (mixer_attention.h; its forward and backward: attention_forward.cpp, attention_backward.cpp).
#include "model/mixer_attention.h"

#include <cmath>

#include "core/error.h"
#include "kernels/attention.h"

namespace gatedlm::model {

using namespace detail;

namespace {

template <typename T>
void resize_buffer(std::vector<T>& v, int64_t size, bool needed = true) {
  v.assign(needed ? static_cast<size_t>(size) : 0, T(0));
}

const Mixer<float>& attention_mixer_float() {
  static const AttentionMixer<float> mixer;
  return mixer;
}
const Mixer<double>& attention_mixer_double() {
  static const AttentionMixer<double> mixer;
  return mixer;
}

}  // namespace

// Hugging Face Qwen3's names, in the order of the checkpoint's tensor map.
void add_attention_params(LayerParams& p, const ModelConfig& c) {
  const int64_t d = c.d_model;
  p.add("self_attn.q_proj.weight", {c.q_dim(), d}, ParamKind::matrix);
  // Switch heads replace v_proj (and k_proj) by experts, added after the gate below.
  if (!c.switch_heads.switches_k()) p.add("self_attn.k_proj.weight", {c.kv_dim(), d}, ParamKind::matrix);
  if (!c.switch_heads.on()) p.add("self_attn.v_proj.weight", {c.kv_dim(), d}, ParamKind::matrix);
  // The gate's rows follow v_proj's so that q|k|v|gate is one [rows, d] matrix: the
  // model multiplies them in one product (attention_forward.cpp). gate_proj|up_proj likewise.
  if (c.has_gate()) {
    if (c.gate.input == GateInput::hidden)
      p.add("self_attn.gate.weight", {c.gate_out(), c.gate_in()}, ParamKind::gate);
    else
      p.add("self_attn.gate.weight", {c.gate_out()}, ParamKind::gate);
  }
  // Biases of q|k|v|gate likewise adjacent, in the product's column order.
  if (c.attn_qkv_bias) {
    p.add("self_attn.q_proj.bias", {c.q_dim()}, ParamKind::bias);
    p.add("self_attn.k_proj.bias", {c.kv_dim()}, ParamKind::bias);
    p.add("self_attn.v_proj.bias", {c.kv_dim()}, ParamKind::bias);
    if (c.gate_has_bias()) p.add("self_attn.gate.bias", {c.gate_out()}, ParamKind::bias);
  }
  for (const SwitchHeadsTensor& t : switch_heads_tensors(c))
    p.add(t.suffix, t.shape, t.router ? ParamKind::switch_router : ParamKind::matrix);
  p.add("self_attn.o_proj.weight", {d, c.q_dim()}, ParamKind::matrix);
  if (c.attn_o_bias) p.add("self_attn.o_proj.bias", {d}, ParamKind::bias);
  if (c.qk_norm) {
    p.add("self_attn.q_norm.weight", {c.head_dim}, ParamKind::norm);
    p.add("self_attn.k_norm.weight", {c.head_dim}, ParamKind::norm);
  }
  if (c.sdpa_transform == SdpaTransform::rmsnorm) p.add("self_attn.sdpa_norm.weight", {c.head_dim}, ParamKind::norm);
  if (c.attention_sinks) p.add("self_attn.sinks", {c.n_heads}, ParamKind::sink);  // gpt-oss's name
}

LayerKindSpec attention_layer_kind() {
  return {LayerKind::full_attention,
          "full_attention",
          DecodeStateKind::kv_cache,
          LayerCaptures{.attention_probs = true, .sdpa_output = true, .recurrent_state = false},
          add_attention_params,
          attention_mixer_float,
          attention_mixer_double};
}

template <typename T>
void AttentionMixer<T>::resize(LayerActivations<T>& a, int64_t n, const ModelConfig& c) const {
  const int64_t qd = c.q_dim(), kvd = c.kv_dim();
  const GateShape gs = GateShape::of(c);
  resize_buffer(a.q0, n * qd);
  resize_buffer(a.k0, n * kvd);
  resize_buffer(a.v0, n * kvd);
  resize_buffer(a.gate_pre, n * gs.gate_out, keeps_gate_pre(c));
  resize_buffer(a.gate_score, n * gs.target_size(), c.has_gate());
  resize_buffer(a.gated, n * gs.target_size(), c.has_gate());
  resize_buffer(a.qr, n * qd);
  resize_buffer(a.kr, n * kvd);
  resize_buffer(a.rstd_q, n * c.n_heads, c.qk_norm);
  resize_buffer(a.rstd_k, n * c.n_kv_heads, c.qk_norm);
  resize_buffer(a.y0, n * qd);
  resize_buffer(a.lse, n * c.n_heads);
  resize_buffer(a.y1, n * qd, c.sdpa_transform != SdpaTransform::none);
  resize_buffer(a.rstd_y, n * c.n_heads, c.sdpa_transform == SdpaTransform::rmsnorm);
}

// The fused q|k|v(|gate) product and its biases rely on the layout's adjacency.
template <typename T>
void AttentionMixer<T>::check_layout(int64_t, const ModelConfig& c, const LayerWeights<T>& w, const ParamLayout&,
                                     const T*) const {
  const int64_t d = c.d_model, qd = c.q_dim(), kvd = c.kv_dim();
  const int64_t kw = k_product_width(c), vw = v_product_width(c);
  const T* wq = w.wq.values;
  const bool adjacent = (!kw || w.wk.values == wq + qd * d) && (!vw || w.wv.values == wq + (qd + kw) * d) &&
                        (!gate_in_qkv_product(c) || w.gate.values == wq + gate_product_column(c) * d) &&
                        (!c.attn_qkv_bias ||
                         (w.bk == w.bq + qd && w.bv == w.bk + kvd && (!c.gate_has_bias() || w.bgate == w.bv + kvd)));
  if (!adjacent) fail("internal error: the parameter layout does not keep the fused projections adjacent");
}

template <typename T>
void AttentionMixer<T>::probe(BlockProbe<T>& out, const LayerActivations<T>& a, const ModelConfig& c) const {
  const T* sdpa = c.sdpa_transform != SdpaTransform::none ? a.y1.data() : a.y0.data();
  out.q_roped = a.qr.data();
  out.k_roped = a.kr.data();
  out.sdpa_out = sdpa;
  switch (c.gate.position) {
    case GatePosition::sdpa: out.gate_y = sdpa; break;
    case GatePosition::query: out.gate_y = a.q0.data(); break;
    case GatePosition::key: out.gate_y = a.k0.data(); break;
    case GatePosition::value: out.gate_y = a.v0.data(); break;
    case GatePosition::dense: out.gate_y = a.o0.data(); break;
    case GatePosition::none: break;
  }
  if (c.has_gate()) {
    out.gate_y_out = a.gated.data();
    out.gate_score = a.gate_score.data();
  }
  if (c.switch_heads.on()) out.switch_heads = &a.sw;
}

template <typename T>
kernels::AttentionShape AttentionMixer<T>::sdpa_shape(const ModelConfig& c, int64_t batch, int64_t seq) const {
  return {batch,     seq, c.n_heads, c.n_kv_heads, c.head_dim, 1.0 / std::sqrt(static_cast<double>(c.head_dim)),
          window(c), c.attention_normalizer == AttentionNormalizer::softpick};
}

template <typename T>
bool AttentionMixer<T>::attention_probs(T* probs, const LayerActivations<T>& a, const LayerWeights<T>& w,
                                        const ModelConfig& c, int64_t batch, int64_t seq, int64_t b) const {
  kernels::attention_probs(probs, a.qr.data(), a.kr.data(), sdpa_shape(c, batch, seq), b, w.sinks);
  return true;
}

// The class, with the members defined here (forward: attention_forward.cpp; backward:
// attention_backward.cpp).
template class AttentionMixer<float>;
template class AttentionMixer<double>;

}  // namespace gatedlm::model
