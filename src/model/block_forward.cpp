// One block's forward in three parts (shapes: model_state.h's LayerActivations):
//   attention inputs:  resid[l] -> h -> q|k|v(|gate) product -> gates on q/k/v -> QK-norm, RoPE
//   attention outputs: SDPA -> sdpa_transform -> gate -> o_proj -> sandwich norm -> mid
//   FFN:               mid -> h2 -> SwiGLU or MoE -> sandwich norm -> resid[l + 1]
#include <cmath>

#include "kernels/activations.h"
#include "kernels/attention.h"
#include "kernels/bias.h"
#include "kernels/matmul.h"
#include "kernels/parallel_work.h"
#include "kernels/rmsnorm.h"
#include "core/error.h"
#include "model/model_state.h"

namespace gatedlm::model {

namespace k = kernels;
using namespace detail;

namespace {

// Branch output post-processing: clip to (-c, c) (block_backward.cpp's clip_backward
// passes the gradient where the value was inside [-c, c], torch.clamp's convention).
template <typename T>
void add_clipped(T* out, const T* resid, const T* branch, int64_t size, double clip) {
  const T c = static_cast<T>(clip);
#pragma omp parallel for simd schedule(static) if (k::elementwise_in_parallel(size))
  for (int64_t i = 0; i < size; ++i)
    out[i] = resid[i] + (clip > 0 ? std::clamp(branch[i], -c, c) : branch[i]);
}

// Copies the column blocks of src [n, ld], left to right, out to packed buffers.
template <typename T>
void split_columns(const T* src, int64_t n, int64_t ld, std::initializer_list<ColumnBlock<T>> blocks) {
#pragma omp parallel for schedule(static) if (k::elementwise_in_parallel(n * ld))
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

// Gates y_in [n, gate target size] into a.gated (scores into a.gate_score); returns a.gated.
template <typename T>
const T* apply_gate(LayerActivations<T>& a, const T* y_in, GatePre<T> pre, int64_t n, const GateShape& gs) {
  gate_forward(a.gated.data(), a.gate_score.data(), y_in, pre.values, pre.ld, n, gs);
  return a.gated.data();
}

}  // namespace

template <typename T>
void Model<T>::block_forward(int64_t l, const AttentionFn<T>* attend) {
  if (config_.is_linear(l)) {
    linear_attention_forward(l);
  } else {
    attention_inputs_forward(l);
    attention_outputs_forward(l, attend);
  }
  ffn_forward(l);
}

// A Gated DeltaNet layer's token mixer (model/gated_deltanet.h): resid[l] -> a.h -> a.o0,
// then the branch's end as attention's. Training-shaped forwards run whole sequences from a
// zero state; forward_tokens runs the rows in runs over the caller's recurrent states.
template <typename T>
void Model<T>::linear_attention_forward(int64_t l) {
  const ModelConfig& c = config_;
  State& s = *s_;
  LayerActivations<T>& a = s.layers[l];
  const LayerViews<T>& w = w_.layers[l];
  k::rmsnorm_forward(a.h.data(), a.rstd_attn.data(), s.resid[l].data(), w.input_norm, s.n, c.d_model, c.norm_eps);
  if (s.positions.empty()) {
    deltanet_forward(a.o0.data(), a.h.data(), s.batch, s.seq, deltanet_shape(c), deltanet_weights(w), a.lin,
                     &s.lin_times);
  } else {
    const std::vector<DeltaNetRun<T>> runs = linear_runs(l);
    deltanet_forward_runs<T>(a.o0.data(), a.h.data(), s.n, runs, deltanet_shape(c), deltanet_weights(w), a.lin);
  }
  branch_output_forward(l, a.o0.data());
}

// forward_tokens' rows as runs of one sequence each: consecutive rows with the same state
// and consecutive positions; a run at position 0 starts fresh.
template <typename T>
std::vector<DeltaNetRun<T>> Model<T>::linear_runs(int64_t l) const {
  const State& s = *s_;
  if (!linear_state_ || !*linear_state_)
    fail("forward_tokens: a hybrid model needs the recurrent state of its linear-attention layers");
  std::vector<DeltaNetRun<T>> runs;
  for (int64_t r = 0; r < s.n; ++r) {
    const DeltaNetState<T> state = (*linear_state_)(l, r);
    DeltaNetRun<T>* last = runs.empty() ? nullptr : &runs.back();
    if (last && last->state.delta == state.delta && s.positions[r] == s.positions[r - 1] + 1) {
      ++last->count;
    } else {
      runs.push_back({r, 1, state, s.positions[r] == 0});
    }
  }
  return runs;
}

// resid[l] -> a.h -> the fused q|k|v(|gate) product split into a.q0, a.k0, a.v0 (switch
// heads: k/v from their experts), the gate on q, k or v, then a.qr, a.kr after QK-norm and RoPE.
template <typename T>
void Model<T>::attention_inputs_forward(int64_t l) {
  const ModelConfig& c = config_;
  State& s = *s_;
  LayerActivations<T>& a = s.layers[l];
  const LayerViews<T>& w = w_.layers[l];
  const int64_t n = s.n, d = c.d_model, qd = c.q_dim(), kvd = c.kv_dim();
  const GatePosition gp = c.gate.position;
  const GateShape gs = GateShape::of(c);

  k::rmsnorm_forward(a.h.data(), a.rstd_attn.data(), s.resid[l].data(), w.input_norm, n, d, c.norm_eps);
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
  const T* q_in = gp == GatePosition::query ? apply_gate(a, a.q0.data(), pre, n, gs) : a.q0.data();
  const T* k_in = gp == GatePosition::key ? apply_gate(a, a.k0.data(), pre, n, gs) : a.k0.data();
  if (gp == GatePosition::value) apply_gate(a, a.v0.data(), pre, n, gs);
  if (c.qk_norm) {
    k::rmsnorm_forward(a.qr.data(), a.rstd_q.data(), q_in, w.q_norm, n * c.n_heads, c.head_dim, c.norm_eps);
    k::rmsnorm_forward(a.kr.data(), a.rstd_k.data(), k_in, w.k_norm, n * c.n_kv_heads, c.head_dim,
                       c.norm_eps);
  } else {
    std::copy_n(q_in, n * qd, a.qr.data());
    std::copy_n(k_in, n * kvd, a.kr.data());
  }
  if (c.rope_dims > 0 && !s.positions.empty()) {
    k::rope_apply_rows(a.qr.data(), rope_, n, s.positions.data(), c.n_heads, c.head_dim);
    k::rope_apply_rows(a.kr.data(), rope_, n, s.positions.data(), c.n_kv_heads, c.head_dim);
  } else if (c.rope_dims > 0) {
    k::rope_apply(a.qr.data(), rope_, s.batch, s.seq, c.n_heads, c.head_dim, 0, false);
    k::rope_apply(a.kr.data(), rope_, s.batch, s.seq, c.n_kv_heads, c.head_dim, 0, false);
  }
}

// SDPA over a.qr, a.kr and the (gated) values (or the caller's attention over its KV cache
// when attend is given), sdpa_transform, the gate at sdpa or dense, o_proj, the sandwich
// norm, and mid = resid[l] + clip(branch).
template <typename T>
void Model<T>::attention_outputs_forward(int64_t l, const AttentionFn<T>* attend) {
  const ModelConfig& c = config_;
  State& s = *s_;
  LayerActivations<T>& a = s.layers[l];
  const LayerViews<T>& w = w_.layers[l];
  const int64_t n = s.n, d = c.d_model, qd = c.q_dim();
  const GatePosition gp = c.gate.position;
  const GateShape gs = GateShape::of(c);
  const GatePre<T> pre = gate_pre_of(c, s.qkvg, a);
  const T* v_in = gp == GatePosition::value ? a.gated.data() : a.v0.data();

  const k::AttentionShape as{s.batch, s.seq, c.n_heads, c.n_kv_heads, c.head_dim,
                             1.0 / std::sqrt(static_cast<double>(c.head_dim))};
  const bool epilogue_gate = gate_in_attention_epilogue(c);
  if (epilogue_gate) gate_scores(a.gate_score.data(), pre.values, pre.ld, n, gs);
  if (attend) {  // incremental: the caller's attention over its KV cache
    (*attend)(AttentionCall<T>{l, n, a.qr.data(), a.kr.data(), v_in, epilogue_gate ? a.gate_score.data() : nullptr,
                               a.y0.data(), epilogue_gate ? a.gated.data() : nullptr});
  } else if (epilogue_gate) {
    k::attention_forward(a.y0.data(), a.lse.data(), a.qr.data(), a.kr.data(), v_in, as, a.gate_score.data(),
                         a.gated.data());
  } else {
    k::attention_forward(a.y0.data(), a.lse.data(), a.qr.data(), a.kr.data(), v_in, as);
  }
  const T* y = epilogue_gate ? a.gated.data() : a.y0.data();
  if (c.sdpa_transform == SdpaTransform::rmsnorm) {
    k::rmsnorm_forward(a.y1.data(), a.rstd_y.data(), y, w.sdpa_norm, n * c.n_heads, c.head_dim, c.norm_eps);
    y = a.y1.data();
  } else if (c.sdpa_transform == SdpaTransform::silu) {
    k::activation_forward(a.y1.data(), y, n * qd, k::Activation::silu);
    y = a.y1.data();
  }
  if (gp == GatePosition::sdpa && !epilogue_gate) y = apply_gate(a, y, pre, n, gs);
  k::linear_forward(a.o0.data(), y, w.wo, n, qd, d);
  if (w.bo) k::bias_forward(a.o0.data(), w.bo, n, d);
  const T* o = a.o0.data();
  if (gp == GatePosition::dense) o = apply_gate(a, o, pre, n, gs);
  branch_output_forward(l, o);
}

// The end of the token mixer's branch [n, d]: the sandwich norm, and mid = resid[l] + clip(branch).
template <typename T>
void Model<T>::branch_output_forward(int64_t l, const T* branch) {
  const ModelConfig& c = config_;
  State& s = *s_;
  LayerActivations<T>& a = s.layers[l];
  const int64_t n = s.n, d = c.d_model;
  if (c.sandwich_norm) {
    k::rmsnorm_forward(a.o2.data(), a.rstd_o.data(), branch, w_.layers[l].attn_branch_norm, n, d, c.norm_eps);
    branch = a.o2.data();
  }
  add_clipped(a.mid.data(), s.resid[l].data(), branch, n * d, c.residual_clip);
}

// mid -> a.h2 -> dense SwiGLU or the MoE block of model/moe.h -> sandwich norm, and
// resid[l + 1] = mid + clip(branch).
template <typename T>
void Model<T>::ffn_forward(int64_t l) {
  const ModelConfig& c = config_;
  State& s = *s_;
  LayerActivations<T>& a = s.layers[l];
  const LayerViews<T>& w = w_.layers[l];
  const int64_t n = s.n, d = c.d_model, f = c.ffn_hidden;

  k::rmsnorm_forward(a.h2.data(), a.rstd_ffn.data(), a.mid.data(), w.ffn_norm, n, d, c.norm_eps);
  if (MoeBlock<T>* moe = s.moe[l].get()) {
    moe->forward(a.f0.data(), a.h2.data(), n,
                 MoeWeights<T>{w.moe_router, w.moe_experts, w.moe_shared, w.moe_shared_down, w.moe_shared_gate},
                 s.for_backward);
  } else {
    k::linear_forward(a.fgu.data(), a.h2.data(), w.w_gate, n, d, 2 * f);  // gate_proj | up_proj
    k::swiglu_forward(a.fa.data(), a.fgu.data(), n, f);
    k::linear_forward(a.f0.data(), a.fa.data(), w.w_down, n, f, d);
  }
  const T* fo = a.f0.data();
  if (c.sandwich_norm) {
    k::rmsnorm_forward(a.f1.data(), a.rstd_f.data(), fo, w.ffn_branch_norm, n, d, c.norm_eps);
    fo = a.f1.data();
  }
  add_clipped(s.resid[l + 1].data(), a.mid.data(), fo, n * d, c.residual_clip);
}

template void Model<float>::block_forward(int64_t, const AttentionFn<float>*);
template void Model<double>::block_forward(int64_t, const AttentionFn<double>*);

}  // namespace gatedlm::model
