// One block's forward (shapes: model_state.h's LayerActivations), the same for every layer kind:
//   token mixer: resid[l] -> h (input norm) -> the layer's mixer (mixer.h) -> branch
//                -> sandwich norm -> mid = resid[l] + clip(branch)
//   FFN:         mid -> h2 -> SwiGLU or MoE -> sandwich norm -> resid[l + 1]
#include <algorithm>

#include "kernels/activations.h"
#include "kernels/matmul.h"
#include "kernels/parallel_work.h"
#include "kernels/rmsnorm.h"
#include "model/mixer.h"
#include "model/model.h"

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

// Takes the router hook off a MoE block when the forward leaves it, a throwing hook included.
template <typename T>
struct RouterHookReset {
  MoeBlock<T>* moe;
  ~RouterHookReset() {
    if (moe) moe->set_router_hook({});
  }
};

}  // namespace

// The layer's kind decides only what its mixer computes between the input norm and the
// branch's end (attend: forward_tokens' attention over the caller's KV cache, else null).
template <typename T>
void Model<T>::block_forward(int64_t l, const AttentionFn<T>* attend) {
  const ModelConfig& c = config_;
  State& s = *s_;
  LayerActivations<T>& a = s.acts(l);
  const HookCaller<T>& hooks = s.hooks;  // activation hooks (hooks.h): no-ops unless set
  const int64_t d = c.d_model;
  hooks.forward(l, HookPoint::resid_pre, s.resid[l].data(), {d});
  k::rmsnorm_forward(a.h.data(), a.rstd_attn.data(), s.resid[l].data(), w_.layers[l].input_norm, s.n, d,
                     c.norm_eps);
  a.branch = mixers_[l]->forward(mixer_pass(l, attend, /*for_backward=*/false));
  // The branch lies in one of the layer's own buffers (a.o0, a.gated): a hook may change it.
  hooks.forward(l, HookPoint::attn_out, const_cast<T*>(a.branch), {d});
  branch_output_forward(l, a.branch);
  hooks.forward(l, HookPoint::resid_mid, a.mid.data(), {d});
  ffn_forward(l);
  hooks.forward(l, HookPoint::resid_post, s.resid[l + 1].data(), {d});
}

// The end of the token mixer's branch [n, d]: the sandwich norm, and mid = resid[l] + clip(branch).
template <typename T>
void Model<T>::branch_output_forward(int64_t l, const T* branch) {
  const ModelConfig& c = config_;
  State& s = *s_;
  LayerActivations<T>& a = s.acts(l);
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
  LayerActivations<T>& a = s.acts(l);
  const LayerWeights<T>& w = w_.layers[l];
  const int64_t n = s.n, d = c.d_model, f = c.ffn_hidden;

  k::rmsnorm_forward(a.h2.data(), a.rstd_ffn.data(), a.mid.data(), w.ffn_norm, n, d, c.norm_eps);
  if (MoeBlock<T>* moe = s.moe[l].get()) {
    const bool hooked = s.hooks.wants(l, HookPoint::mlp_router);
    if (hooked)
      moe->set_router_hook([&](T* logits, int64_t) { s.hooks.forward(l, HookPoint::mlp_router, logits, {c.moe.n_experts}); });
    const RouterHookReset<T> reset{hooked ? moe : nullptr};
    moe->forward(a.f0.data(), a.h2.data(), n,
                 MoeWeights<T>{w.moe_router, w.moe_experts, w.moe_shared, w.moe_shared_down, w.moe_shared_gate},
                 s.for_backward);
  } else {
    k::linear_forward(a.fgu.data(), a.h2.data(), w.w_gate, n, d, 2 * f);  // gate_proj | up_proj
    s.hooks.forward(l, HookPoint::mlp_pre, a.fgu.data(), {2 * f});
    k::swiglu_forward(a.fa.data(), a.fgu.data(), n, f);
    s.hooks.forward(l, HookPoint::mlp_post, a.fa.data(), {f});
    k::linear_forward(a.f0.data(), a.fa.data(), w.w_down, n, f, d);
  }
  s.hooks.forward(l, HookPoint::mlp_out, a.f0.data(), {d});
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
