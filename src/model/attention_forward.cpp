// Softmax attention's forward (mixer_attention.h; shapes: model_state.h's LayerActivations):
//   inputs:  a.h -> q|k|v(|gate) product -> gates on q/k/v -> QK-norm, RoPE
//   SDPA:    the fused causal kernel, or the caller's attention over its KV cache
//   outputs: sdpa_transform -> gate at sdpa or dense -> o_proj
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/activations.h"
#include "kernels/attention.h"
#include "kernels/attention_sinks.h"
#include "kernels/bias.h"
#include "kernels/matmul.h"
#include "kernels/parallel_work.h"
#include "kernels/rmsnorm.h"
#include "model/mixer_attention.h"

namespace gatedlm::model {

namespace k = kernels;
using namespace detail;

namespace {

// Copies the column blocks of src [n, ld], left to right, out to packed buffers.
template <typename T>
void split_columns(const T* src, int64_t n, int64_t ld, std::initializer_list<ColumnBlock<T>> blocks) {
#pragma omp parallel for schedule(static) if (k::rows_in_parallel(n, ld))
  for (int64_t r = 0; r < n; ++r) {
    int64_t col = 0;
    for (const ColumnBlock<T>& b : blocks) {
      if (b.packed) std::copy_n(src + r * ld + col, b.width, b.packed + r * b.width);
      col += b.width;
    }
  }
}

// The gate's pre-activations [n, gate_out] and their row stride: in place in the fused
// product unless the layer keeps a copy.
template <typename T>
struct GatePre {
  const T* values;
  int64_t ld;
};
template <typename T>
GatePre<T> gate_pre_of(const ModelConfig& c, const std::vector<T>& qkvg, const LayerActivations<T>& a) {
  const bool in_place = gate_in_qkv_product(c) && !keeps_gate_pre(c);
  if (in_place) return {qkvg.data() + gate_product_column(c), qkv_width(c)};
  return {a.gate_pre.data(), GateShape::of(c).gate_out};
}

// gated = combine(y, score) [size] again, after a hook changed score or y.
template <typename T>
void recombine(T* gated, const T* y, const T* score, int64_t size, GateCombine combine) {
#pragma omp parallel for simd schedule(static) if (k::elementwise_in_parallel(size))
  for (int64_t i = 0; i < size; ++i) gated[i] = combine == GateCombine::multiply ? y[i] * score[i] : y[i] + score[i];
}

// Gates y_in [n, gate target size] into a.gated (scores into a.gate_score), with the hooks
// hook_gate (a changed score gates y_in again) and hook_gated; returns a.gated.
template <typename T>
const T* apply_gate(const MixerPass<T>& p, const T* y_in, GatePre<T> pre, const GateShape& gs) {
  LayerActivations<T>& a = p.a;
  const int64_t n = p.s.n, width = gs.target_size();
  gate_forward(a.gated.data(), a.gate_score.data(), y_in, pre.values, pre.ld, n, gs);
  if (p.s.hooks.forward(p.layer, HookPoint::attn_gate, a.gate_score.data(), {width}))
    recombine(a.gated.data(), y_in, a.gate_score.data(), n * width, p.c.gate.combine);
  p.s.hooks.forward(p.layer, HookPoint::attn_gated, a.gated.data(), {width});
  return a.gated.data();
}

// hook_z on the SDPA output y0 [n, H, hd]: a change is what the rest of the forward reads (the
// epilogue gate's Y' is made again from it) and refuses the backward, whose attention kernel
// needs the output it computed.
template <typename T>
void hook_sdpa_output(const MixerPass<T>& p, bool epilogue_gate) {
  const HookCaller<T>& hooks = p.s.hooks;
  if (!hooks.wants(p.layer, HookPoint::attn_z)) return;
  LayerActivations<T>& a = p.a;
  const int64_t size = p.s.n * p.c.q_dim();
  const std::vector<T> before(a.y0.begin(), a.y0.begin() + size);
  hooks.forward(p.layer, HookPoint::attn_z, a.y0.data(), {p.c.n_heads, p.c.head_dim});
  if (std::equal(before.begin(), before.end(), a.y0.begin())) return;
  p.s.backward_refused = cat(hook_name({p.layer, HookPoint::attn_z}), " changed the attention's output");
  if (epilogue_gate) recombine(a.gated.data(), a.y0.data(), a.gate_score.data(), size, GateCombine::multiply);
}

}  // namespace

template <typename T>
const T* AttentionMixer<T>::forward(const MixerPass<T>& p) const {
  inputs_forward(p);
  return outputs_forward(p);
}

// a.h -> the fused q|k|v(|gate) product split into a.q0, a.k0, a.v0 (switch heads: k/v from
// their experts), the gate on q, k or v, then a.qr, a.kr after QK-norm and RoPE.
template <typename T>
void AttentionMixer<T>::inputs_forward(const MixerPass<T>& p) const {
  const ModelConfig& c = p.c;
  ModelState<T>& s = p.s;
  LayerActivations<T>& a = p.a;
  const LayerWeights<T>& w = p.w;
  const int64_t n = s.n, d = c.d_model, qd = c.q_dim(), kvd = c.kv_dim();
  const GatePosition gp = c.gate.position;
  const GateShape gs = GateShape::of(c);

  const bool fused_gate = gate_in_qkv_product(c);
  const int64_t qkv_w = qkv_width(c);
  k::linear_forward(s.qkvg.data(), a.h.data(), w.wq, n, d, qkv_w);
  if (w.bq) k::bias_forward(s.qkvg.data(), w.bq, n, qkv_w);  // q|k|v(|gate) biases, adjacent
  split_columns<T>(s.qkvg.data(), n, qkv_w,
                   {{a.q0.data(), qd}, {a.k0.data(), k_product_width(c)}, {a.v0.data(), v_product_width(c)},
                    {keeps_gate_pre(c) ? a.gate_pre.data() : nullptr, fused_gate ? gs.gate_out : 0}});
  if (c.switch_heads.on())
    switch_heads_forward(a.k0.data(), a.v0.data(), a.sw, s.sw_scratch, a.h.data(), n, switch_weights(w), c);
  if (c.has_gate() && !fused_gate) gate_project(a.gate_pre.data(), a.h.data(), w.gate, n, gs);
  const GatePre<T> pre = gate_pre_of(c, s.qkvg, a);
  const T* q_in = gp == GatePosition::query ? apply_gate(p, a.q0.data(), pre, gs) : a.q0.data();
  const T* k_in = gp == GatePosition::key ? apply_gate(p, a.k0.data(), pre, gs) : a.k0.data();
  if (gp == GatePosition::value) apply_gate(p, a.v0.data(), pre, gs);
  if (c.qk_norm) {
    k::rmsnorm_forward(a.qr.data(), a.rstd_q.data(), q_in, w.q_norm, n * c.n_heads, c.head_dim, c.norm_eps);
    k::rmsnorm_forward(a.kr.data(), a.rstd_k.data(), k_in, w.k_norm, n * c.n_kv_heads, c.head_dim,
                       c.norm_eps);
  } else {
    std::copy_n(q_in, n * qd, a.qr.data());
    std::copy_n(k_in, n * kvd, a.kr.data());
  }
  if (c.rope_dims > 0 && !s.positions.empty()) {
    k::rope_apply_rows(a.qr.data(), p.rope, n, s.positions.data(), c.n_heads, c.head_dim);
    k::rope_apply_rows(a.kr.data(), p.rope, n, s.positions.data(), c.n_kv_heads, c.head_dim);
  } else if (c.rope_dims > 0) {
    k::rope_apply(a.qr.data(), p.rope, s.batch, s.seq, c.n_heads, c.head_dim, 0, false);
    k::rope_apply(a.kr.data(), p.rope, s.batch, s.seq, c.n_kv_heads, c.head_dim, 0, false);
  }
  s.hooks.forward(p.layer, HookPoint::attn_q, a.qr.data(), {c.n_heads, c.head_dim});
  s.hooks.forward(p.layer, HookPoint::attn_k, a.kr.data(), {c.n_kv_heads, c.head_dim});
}

// SDPA over a.qr, a.kr and the (gated) values, sdpa_transform, the gate at sdpa or dense and
// o_proj; returns the branch output (a.o0, or a.gated with the dense gate).
template <typename T>
const T* AttentionMixer<T>::outputs_forward(const MixerPass<T>& p) const {
  const ModelConfig& c = p.c;
  ModelState<T>& s = p.s;
  LayerActivations<T>& a = p.a;
  const LayerWeights<T>& w = p.w;
  const int64_t n = s.n, d = c.d_model, qd = c.q_dim();
  const GatePosition gp = c.gate.position;
  const GateShape gs = GateShape::of(c);
  const GatePre<T> pre = gate_pre_of(c, s.qkvg, a);
  const T* v_in = gp == GatePosition::value ? a.gated.data() : a.v0.data();

  const bool epilogue_gate = gate_in_attention_epilogue(c);
  if (epilogue_gate) {
    gate_scores(a.gate_score.data(), pre.values, pre.ld, n, gs);
    s.hooks.forward(p.layer, HookPoint::attn_gate, a.gate_score.data(), {gs.target_size()});
  }
  // v_in lies in the layer's own a.v0 or a.gated: a hook may change it.
  s.hooks.forward(p.layer, HookPoint::attn_v, const_cast<T*>(v_in), {c.n_kv_heads, c.head_dim});
  sdpa_forward(p, v_in);
  hook_sdpa_output(p, epilogue_gate);
  if (epilogue_gate) s.hooks.forward(p.layer, HookPoint::attn_gated, a.gated.data(), {gs.target_size()});
  const T* y = epilogue_gate ? a.gated.data() : a.y0.data();
  if (c.sdpa_transform == SdpaTransform::rmsnorm) {
    k::rmsnorm_forward(a.y1.data(), a.rstd_y.data(), y, w.sdpa_norm, n * c.n_heads, c.head_dim, c.norm_eps);
    y = a.y1.data();
  } else if (c.sdpa_transform == SdpaTransform::silu) {
    k::activation_forward(a.y1.data(), y, n * qd, k::Activation::silu);
    y = a.y1.data();
  }
  if (gp == GatePosition::sdpa && !epilogue_gate) y = apply_gate(p, y, pre, gs);
  k::linear_forward(a.o0.data(), y, w.wo, n, qd, d);
  if (w.bo) k::bias_forward(a.o0.data(), w.bo, n, d);
  const T* o = a.o0.data();
  if (gp == GatePosition::dense) o = apply_gate(p, o, pre, gs);
  return o;
}

template <typename T>
void AttentionMixer<T>::sdpa_forward(const MixerPass<T>& p, const T* v_in) const {
  const ModelConfig& c = p.c;
  const ModelState<T>& s = p.s;
  LayerActivations<T>& a = p.a;
  const bool epilogue_gate = gate_in_attention_epilogue(c);
  if (p.attend) {  // incremental: the caller's attention over its KV cache
    (*p.attend)(AttentionCall<T>{p.layer, s.n, a.qr.data(), a.kr.data(), v_in,
                                 epilogue_gate ? a.gate_score.data() : nullptr, a.y0.data(),
                                 epilogue_gate ? a.gated.data() : nullptr, p.w.sinks});
    return;
  }
  const k::AttentionShape as = sdpa_shape(c, s.batch, s.seq);
  if (epilogue_gate)
    k::attention_forward(a.y0.data(), a.lse.data(), a.qr.data(), a.kr.data(), v_in, as, a.gate_score.data(),
                         a.gated.data());
  else
    k::attention_forward(a.y0.data(), a.lse.data(), a.qr.data(), a.kr.data(), v_in, as);
  // Learned sinks rescale the rows (and Y') and extend each row's log-sum-exp, which the backward reads.
  if (p.w.sinks)
    k::attention_sinks_forward(a.y0.data(), epilogue_gate ? a.gated.data() : nullptr, a.lse.data(), p.w.sinks, as);
  if (s.hooks.wants(p.layer, HookPoint::attn_pattern)) hook_pattern(p, v_in);
}

// hook_pattern: the probabilities [B, H, S, S] of this forward (Model::attention_probs's), and
// when the hook changed them, y0 = P v (and the epilogue gate's Y') from the changed ones; the
// backward is then refused (its kernel recomputes the probabilities from q and k).
template <typename T>
void AttentionMixer<T>::hook_pattern(const MixerPass<T>& p, const T* v_in) const {
  const ModelConfig& c = p.c;
  const ModelState<T>& s = p.s;
  LayerActivations<T>& a = p.a;
  const int64_t B = s.batch, S = s.seq, H = c.n_heads, hd = c.head_dim, group = H / c.n_kv_heads;
  const int64_t per_row = H * S * S;
  std::vector<T> probs(static_cast<size_t>(B * per_row));
  const k::AttentionShape as = sdpa_shape(c, B, S);
  for (int64_t b = 0; b < B; ++b) k::attention_probs(probs.data() + b * per_row, a.qr.data(), a.kr.data(), as, b, p.w.sinks);
  const std::vector<T> before = probs;
  s.hooks.forward_shaped(p.layer, HookPoint::attn_pattern, probs.data(), {B, H, S, S});
  if (probs == before) return;
  p.s.backward_refused = cat(hook_name({p.layer, HookPoint::attn_pattern}), " changed the attention probabilities");
  const int64_t qd = c.q_dim(), kvd = c.kv_dim();
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < S; ++t) {
        T* y = a.y0.data() + (b * S + t) * qd + h * hd;
        std::fill_n(y, hd, T(0));
        const T* row = probs.data() + b * per_row + (h * S + t) * S;
        for (int64_t j = 0; j < S; ++j) {
          const T* v = v_in + (b * S + j) * kvd + (h / group) * hd;
          for (int64_t i = 0; i < hd; ++i) y[i] += row[j] * v[i];
        }
      }
  if (gate_in_attention_epilogue(c))
    recombine(a.gated.data(), a.y0.data(), a.gate_score.data(), s.n * qd, GateCombine::multiply);
}

// The virtual members defined here (the class and its other members: mixer_attention.cpp).
template const float* AttentionMixer<float>::forward(const MixerPass<float>&) const;
template const double* AttentionMixer<double>::forward(const MixerPass<double>&) const;
template void AttentionMixer<float>::sdpa_forward(const MixerPass<float>&, const float*) const;
template void AttentionMixer<double>::sdpa_forward(const MixerPass<double>&, const double*) const;
template void AttentionMixer<float>::hook_pattern(const MixerPass<float>&, const float*) const;
template void AttentionMixer<double>::hook_pattern(const MixerPass<double>&, const double*) const;

}  // namespace gatedlm::model
