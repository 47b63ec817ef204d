// Softmax attention's backward (mixer_attention.h): attention_forward.cpp's parts in reverse.
// The parts hand each other pointers into the State's scratch buffers, which every layer
// reuses; backward() ends with d loss / d h in s.dh.
#include <cmath>
#include <vector>

#include "kernels/activations.h"
#include "kernels/attention.h"
#include "kernels/attention_sinks.h"
#include "kernels/bias.h"
#include "kernels/matmul.h"
#include "kernels/rmsnorm.h"
#include "model/mixer_attention.h"

namespace gatedlm::model {

namespace k = kernels;
using namespace detail;

namespace {

// Packed buffers side by side into dst [n, ld] (the reverse of the forward's split_columns).
template <typename T>
void gather_columns(T* dst, int64_t n, int64_t ld, std::initializer_list<ColumnBlock<const T>> blocks) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    int64_t col = 0;
    for (const ColumnBlock<const T>& b : blocks) {
      if (b.packed) std::copy_n(b.packed + r * b.width, b.width, dst + r * ld + col);
      col += b.width;
    }
  }
}

// Where the gate's backward writes d loss / d pre [n, gate_out] (row stride ld): the gate's
// columns of the fused gradient dqkvg, or dgate when its projection is separate; the
// projection's backward comes last, with q, k and v's. pre is null when the layer keeps
// no copy (backward then works from the score).
template <typename T>
struct GateGrad {
  T* dpre;
  int64_t ld;
  const T* pre;
};
template <typename T>
GateGrad<T> gate_grad_of(const ModelConfig& c, std::vector<T>& dqkvg, std::vector<T>& dgate,
                         const LayerActivations<T>& a) {
  const bool fused_gate = gate_in_qkv_product(c);
  return {fused_gate ? dqkvg.data() + gate_product_column(c) : dgate.data(),
          fused_gate ? qkv_width(c) : GateShape::of(c).gate_out, keeps_gate_pre(c) ? a.gate_pre.data() : nullptr};
}

// The names the backward's parts give a pass (n rows; gradients g; the gate's position gp,
// shape gs and where its gradient goes, gg).
template <typename T>
struct BackwardNames {
  const ModelConfig& c;
  ModelState<T>& s;
  LayerActivations<T>& a;
  const LayerWeights<T>& w;
  const LayerViews<T>& g;
  int64_t n, d, qd;
  GatePosition gp;
  GateShape gs;
  GateGrad<T> gg;
};
template <typename T>
BackwardNames<T> backward_names(const MixerPass<T>& p) {
  return {p.c,          p.s, p.a, p.w, *p.g, p.s.n, p.c.d_model, p.c.q_dim(), p.c.gate.position, GateShape::of(p.c),
          gate_grad_of(p.c, p.s.dqkvg, p.s.dgate, p.a)};
}

}  // namespace

template <typename T>
void AttentionMixer<T>::backward(const MixerPass<T>& p, const T* d_branch) const {
  const T* dy = outputs_backward(p, d_branch);
  report_z_gradient(p, dy);
  sdpa_backward(p, dy);
  inputs_backward(p);
}

// hook_z's gradient: dy, or with the epilogue gate (dy = d loss / d Y') dy * score.
template <typename T>
void AttentionMixer<T>::report_z_gradient(const MixerPass<T>& p, const T* dy) const {
  const HookCaller<T>& hooks = p.s.hooks;
  if (!hooks.wants_gradient(p.layer, HookPoint::attn_z)) return;
  const int64_t size = p.s.n * p.c.q_dim();
  std::vector<T> dz(dy, dy + size);
  if (gate_in_attention_epilogue(p.c))
    for (int64_t i = 0; i < size; ++i) dz[i] *= p.a.gate_score[i];
  hooks.gradient(p.layer, HookPoint::attn_z, dz.data(), {p.c.n_heads, p.c.head_dim});
}

// The branch after SDPA: branch = gate_dense(o0), o0 = y_final W_o^T, y_final =
// gate_sdpa(transform(y0)). Returns d loss / d y0 (d loss / d Y' when the gate runs in the
// attention kernel's epilogue), in s.dq0 or s.dq1.
template <typename T>
const T* AttentionMixer<T>::outputs_backward(const MixerPass<T>& p, const T* d_branch) const {
  const auto [c, s, a, w, g, n, d, qd, gp, gs, gg] = backward_names(p);

  const T* d_o = d_branch;
  if (gp == GatePosition::dense) {
    std::fill_n(s.dc.data(), n * d, T(0));
    gate_backward(s.dc.data(), gg.dpre, gg.ld, s.dscore.data(), d_o, a.o0.data(), gg.pre, gs.gate_out,
                  a.gate_score.data(), n, gs);
    d_o = s.dc.data();
  }
  const T* y1 = c.sdpa_transform != SdpaTransform::none ? a.y1.data() : a.y0.data();
  const T* y2 = gp == GatePosition::sdpa ? a.gated.data() : y1;
  T* dy = s.dq0.data();
  zero(s.dq0);
  if (g.bo) k::bias_backward(g.bo, d_o, n, d);
  k::linear_backward(dy, g.wo, d_o, y2, w.wo.values, n, qd, d);
  const bool epilogue_gate = gate_in_attention_epilogue(c);  // then dy stays d loss / d Y' for the kernel
  if (gp == GatePosition::sdpa && !epilogue_gate) {
    zero(s.dq1);
    gate_backward(s.dq1.data(), gg.dpre, gg.ld, s.dscore.data(), dy, y1, gg.pre, gs.gate_out, a.gate_score.data(),
                  n, gs);
    dy = s.dq1.data();
  }
  if (c.sdpa_transform != SdpaTransform::none) {
    T* dy0 = dy == s.dq0.data() ? s.dq1.data() : s.dq0.data();
    std::fill_n(dy0, n * qd, T(0));
    if (c.sdpa_transform == SdpaTransform::rmsnorm)
      k::rmsnorm_backward(dy0, g.sdpa_norm, dy, a.y0.data(), w.sdpa_norm, a.rstd_y.data(), n * c.n_heads,
                          c.head_dim);
    else
      k::activation_backward(dy0, dy, a.y0.data(), n * qd, k::Activation::silu);
    dy = dy0;
  }
  return dy;
}

// SDPA: from dy, the gradients w.r.t. the roped q and k (s.dq2, s.dk0, RoPE undone) and
// the (possibly gated) v (s.dv0); the epilogue gate's gradient goes to its pre-activations.
template <typename T>
void AttentionMixer<T>::sdpa_backward(const MixerPass<T>& p, const T* dy) const {
  const ModelConfig& c = p.c;
  ModelState<T>& s = p.s;
  LayerActivations<T>& a = p.a;
  const int64_t n = s.n;
  const GatePosition gp = c.gate.position;
  const GateShape gs = GateShape::of(c);
  const GateGrad<T> gg = gate_grad_of(c, s.dqkvg, s.dgate, a);
  const bool epilogue_gate = gate_in_attention_epilogue(c);

  const T* v_in = gp == GatePosition::value ? a.gated.data() : a.v0.data();
  zero(s.dq2);
  zero(s.dk0);
  zero(s.dv0);
  const k::AttentionShape as = this->sdpa_shape(c, s.batch, s.seq);
  // The elementwise sigmoid gate's whole backward runs in the kernel: it writes dpre into
  // the gate's columns directly; other gates get dscore and finish below.
  const bool dpre_in_kernel = epilogue_gate && c.gate.granularity == GateGranularity::elementwise &&
                              !c.gate.head_shared && c.gate.activation == k::Activation::sigmoid;
  T* dgate_out = !epilogue_gate ? nullptr : dpre_in_kernel ? gg.dpre : s.dscore.data();
  k::attention_backward(s.dq2.data(), s.dk0.data(), s.dv0.data(), dy, a.qr.data(), a.kr.data(), v_in,
                        a.y0.data(), a.lse.data(), as, epilogue_gate ? a.gate_score.data() : nullptr, dgate_out,
                        dpre_in_kernel ? k::GateGradLayout{gg.ld, true} : k::GateGradLayout{});
  if (p.w.sinks)
    k::attention_sinks_backward(p.g->sinks, dy, epilogue_gate ? a.gate_score.data() : nullptr, a.y0.data(),
                                a.lse.data(), p.w.sinks, as);
  // Gradients at the roped q and k and at v_in, before RoPE is undone below (hooks.h).
  s.hooks.gradient(p.layer, HookPoint::attn_q, s.dq2.data(), {c.n_heads, c.head_dim});
  s.hooks.gradient(p.layer, HookPoint::attn_k, s.dk0.data(), {c.n_kv_heads, c.head_dim});
  s.hooks.gradient(p.layer, HookPoint::attn_v, s.dv0.data(), {c.n_kv_heads, c.head_dim});
  if (epilogue_gate && !dpre_in_kernel)
    gate_scores_backward(gg.dpre, gg.ld, s.dscore.data(), gg.pre, gs.gate_out, a.gate_score.data(), n, gs);
  if (c.rope_dims > 0) {
    k::rope_apply(s.dq2.data(), p.rope, s.batch, s.seq, c.n_heads, c.head_dim, 0, true);
    k::rope_apply(s.dk0.data(), p.rope, s.batch, s.seq, c.n_kv_heads, c.head_dim, 0, true);
  }
}

// From d loss / d (roped q, k, v_in) back through QK-norm and the gate on q, k or v to the
// fused q|k|v(|gate) product and the switch heads: s.dh = d loss / d h.
template <typename T>
void AttentionMixer<T>::inputs_backward(const MixerPass<T>& p) const {
  const auto [c, s, a, w, g, n, d, qd, gp, gs, gg] = backward_names(p);

  const T* q_in = gp == GatePosition::query ? a.gated.data() : a.q0.data();
  const T* k_in = gp == GatePosition::key ? a.gated.data() : a.k0.data();
  T* dq = s.dq2.data();
  T* dk = s.dk0.data();
  if (c.qk_norm) {
    zero(s.dq1);
    k::rmsnorm_backward(s.dq1.data(), g.q_norm, dq, q_in, w.q_norm, a.rstd_q.data(), n * c.n_heads,
                        c.head_dim);
    dq = s.dq1.data();
    zero(s.dk1);
    k::rmsnorm_backward(s.dk1.data(), g.k_norm, dk, k_in, w.k_norm, a.rstd_k.data(), n * c.n_kv_heads,
                        c.head_dim);
    dk = s.dk1.data();
  }
  T* dv = s.dv0.data();
  if (gp == GatePosition::query) {
    T* out = dq == s.dq1.data() ? s.dq0.data() : s.dq1.data();
    std::fill_n(out, n * qd, T(0));
    gate_backward(out, gg.dpre, gg.ld, s.dscore.data(), dq, a.q0.data(), gg.pre, gs.gate_out, a.gate_score.data(),
                  n, gs);
    dq = out;
  } else if (gp == GatePosition::key) {
    zero(s.dk2);
    gate_backward(s.dk2.data(), gg.dpre, gg.ld, s.dscore.data(), dk, a.k0.data(), gg.pre, gs.gate_out,
                  a.gate_score.data(), n, gs);
    dk = s.dk2.data();
  } else if (gp == GatePosition::value) {
    zero(s.dv1);
    gate_backward(s.dv1.data(), gg.dpre, gg.ld, s.dscore.data(), dv, a.v0.data(), gg.pre, gs.gate_out,
                  a.gate_score.data(), n, gs);
    dv = s.dv1.data();
  }
  // d loss / d h and the weight gradients of q|k|v(|gate), one product each (the gate's
  // columns hold dpre already).
  const int64_t qkv_w = qkv_width(c);
  T* dh = s.dh.data();
  gather_columns<T>(s.dqkvg.data(), n, qkv_w, {{dq, qd}, {dk, k_product_width(c)}, {dv, v_product_width(c)}});
  if (g.bq) k::bias_backward(g.bq, s.dqkvg.data(), n, qkv_w);
  k::linear_backward(dh, g.wq, s.dqkvg.data(), a.h.data(), w.wq.values, n, d, qkv_w, /*accumulate_dx=*/false);
  if (c.has_gate() && !gate_in_qkv_product(c))
    gate_project_backward(dh, g.gate, s.dgate.data(), a.h.data(), w.gate.values, n, gs);
  if (c.switch_heads.on())
    switch_heads_backward(dh, SwitchHeadsGrads<T>{g.switch_router, g.k_experts, g.v_experts}, s.sw_scratch, dk, dv,
                          a.h.data(), a.sw, switch_weights(w), c);
}

// The virtual members defined here (the class and its other members: mixer_attention.cpp).
template void AttentionMixer<float>::backward(const MixerPass<float>&, const float*) const;
template void AttentionMixer<double>::backward(const MixerPass<double>&, const double*) const;
template void AttentionMixer<float>::sdpa_backward(const MixerPass<float>&, const float*) const;
template void AttentionMixer<double>::sdpa_backward(const MixerPass<double>&, const double*) const;
template void AttentionMixer<float>::report_z_gradient(const MixerPass<float>&, const float*) const;
template void AttentionMixer<double>::report_z_gradient(const MixerPass<double>&, const double*) const;

}  // namespace gatedlm::model
