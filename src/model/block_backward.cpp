// One block's backward, the forward's parts in reverse (block_forward.cpp). s.dres carries
// d loss / d resid[l + 1] in and d loss / d resid[l] out; the parts hand each other
// pointers into the State's scratch buffers, which every block reuses.
#include "kernels/matmul.h"
#include "kernels/rmsnorm.h"
#include "model/mixer.h"
#include "model/model.h"

namespace gatedlm::model {

namespace k = kernels;
using namespace detail;

namespace {

// The gradient of block_forward.cpp's add_clipped: dout where the branch's value was
// inside [-c, c] (torch.clamp's convention), 0 elsewhere.
template <typename T>
void clip_backward(T* dbranch, const T* dout, const T* branch, int64_t size, double clip) {
  const T c = static_cast<T>(clip);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < size; ++i)
    dbranch[i] = (clip <= 0 || (branch[i] >= -c && branch[i] <= c)) ? dout[i] : T(0);
}

}  // namespace

// The forward's parts in reverse: the FFN, the branch's end, the layer's mixer (mixer.h),
// which leaves d loss / d h in s.dh, and the input norm: s.dres += d loss / d resid[l].
template <typename T>
void Model<T>::block_backward(int64_t l) {
  const ModelConfig& c = config_;
  State& s = *s_;
  const LayerWeights<T>& w = w_.layers[l];
  const LayerActivations<T>& a = s.layers[l];
  const int64_t d = c.d_model;
  s.hooks.gradient(l, HookPoint::resid_post, s.dres.data(), {d});
  ffn_backward(l);
  s.hooks.gradient(l, HookPoint::resid_mid, s.dres.data(), {d});
  const T* d_branch = branch_output_backward(l, a.branch);
  s.hooks.gradient(l, HookPoint::attn_out, d_branch, {d});
  mixers_[l]->backward(mixer_pass(l, nullptr, /*for_backward=*/true), d_branch);
  k::rmsnorm_backward(s.dres.data(), g_.layers[l].input_norm, s.dh.data(), s.resid[l].data(), w.input_norm,
                      a.rstd_attn.data(), s.n, d);
  s.hooks.gradient(l, HookPoint::resid_pre, s.dres.data(), {d});
}

// The end of the token mixer's branch (mid = x + clip(sandwich(branch))): returns
// d loss / d branch [n, d] (in s.da or s.db) from s.dres.
template <typename T>
const T* Model<T>::branch_output_backward(int64_t l, const T* branch) {
  const ModelConfig& c = config_;
  State& s = *s_;
  LayerActivations<T>& a = s.layers[l];
  const int64_t n = s.n, d = c.d_model;
  T* d_o = s.da.data();
  clip_backward(d_o, s.dres.data(), c.sandwich_norm ? a.o2.data() : branch, n * d, c.residual_clip);
  if (c.sandwich_norm) {
    std::fill_n(s.db.data(), n * d, T(0));
    k::rmsnorm_backward(s.db.data(), g_.layers[l].attn_branch_norm, d_o, branch, w_.layers[l].attn_branch_norm,
                        a.rstd_o.data(), n, d);
    d_o = s.db.data();
  }
  return d_o;
}

// FFN branch: resid[l+1] = mid + clip(sandwich(f0)); s.dres becomes d loss / d mid.
template <typename T>
void Model<T>::ffn_backward(int64_t l) {
  const ModelConfig& c = config_;
  State& s = *s_;
  LayerActivations<T>& a = s.layers[l];
  const LayerWeights<T>& w = w_.layers[l];
  const LayerViews<T>& g = g_.layers[l];
  const int64_t n = s.n, d = c.d_model, f = c.ffn_hidden;
  T* dres = s.dres.data();

  T* df = s.da.data();
  clip_backward(df, dres, c.sandwich_norm ? a.f1.data() : a.f0.data(), n * d, c.residual_clip);
  if (c.sandwich_norm) {
    std::fill_n(s.db.data(), n * d, T(0));
    k::rmsnorm_backward(s.db.data(), g.ffn_branch_norm, df, a.f0.data(), w.ffn_branch_norm, a.rstd_f.data(),
                        n, d);
    df = s.db.data();
  }
  s.hooks.gradient(l, HookPoint::mlp_out, df, {d});
  T* dh = s.dh.data();
  if (MoeBlock<T>* moe = s.moe[l].get()) {
    int64_t index = 0;  // among the MoE layers
    for (int64_t i = 0; i < l; ++i) index += s.moe[i] != nullptr;
    // d loss / d P_i = lb_coef / layers * E * f_i (the loss is the mean over MoE layers).
    const double layers = static_cast<double>(c.moe.moe_layers(c.n_layers));
    std::vector<double> lb_weight = balance_shares(index);
    // A seeded backward (backward_from_logits) is the gradient of the seed alone.
    const double aux = s.seeded_logits ? 0.0 : 1.0;
    for (double& v : lb_weight) v *= aux * c.moe.lb_coef / layers * static_cast<double>(c.moe.n_experts);
    moe->backward(dh, MoeGrads<T>{g.moe_router, g.moe_experts, g.moe_shared, g.moe_shared_down, g.moe_shared_gate},
                  df, a.h2.data(),
                  MoeWeights<T>{w.moe_router, w.moe_experts, w.moe_shared, w.moe_shared_down, w.moe_shared_gate},
                  lb_weight, aux * c.moe.z_coef / layers);
  } else {
    k::linear_backward(s.dfa.data(), g.w_down, df, a.fa.data(), w.w_down.values, n, f, d, /*accumulate_dx=*/false);
    k::swiglu_backward(s.dfgu.data(), s.dfa.data(), a.fgu.data(), n, f);
    k::linear_backward(dh, g.w_gate, s.dfgu.data(), a.h2.data(), w.w_gate.values, n, d, 2 * f, /*accumulate_dx=*/false);
  }
  k::rmsnorm_backward(dres, g.ffn_norm, dh, a.mid.data(), w.ffn_norm, a.rstd_ffn.data(), n, d);
}

template void Model<float>::block_backward(int64_t);
template void Model<double>::block_backward(int64_t);

}  // namespace gatedlm::model
