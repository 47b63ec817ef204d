#include "model/model.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "core/error.h"
#include "kernels/activations.h"
#include "kernels/attention.h"
#include "kernels/bias.h"
#include "kernels/cross_entropy.h"
#include "kernels/matmul.h"
#include "kernels/rmsnorm.h"
#include "model/gate.h"
#include "model/moe.h"
#include "model/switch_heads.h"

namespace gatedlm::model {

namespace k = kernels;

// Saved tensors of one block for n = batch*seq tokens. Shapes in comments; a buffer
// that the config does not need stays empty.
template <typename T>
struct LayerActivations {
  std::vector<T> rstd_attn;        // [n]
  std::vector<T> h;                // [n, d]  rmsnorm(x): q/k/v and gate input
  std::vector<T> q0, k0, v0;       // [n, q_dim], [n, kv_dim] x2: projection outputs
  std::vector<T> gate_pre;         // [n, gate_out] gate projection (before the activation)
  std::vector<T> gate_score;       // [n, gate target size]
  std::vector<T> gated;            // gate output at whichever position the gate sits
  std::vector<T> qr, kr;           // [n, q_dim], [n, kv_dim]: after QK-norm and RoPE
  std::vector<T> rstd_q, rstd_k;   // [n*n_q], [n*n_kv]
  std::vector<T> y0;               // [n, q_dim] SDPA output
  std::vector<T> lse;              // [batch, n_q, seq]
  std::vector<T> y1, rstd_y;       // after sdpa_transform ([n, q_dim], [n*n_q])
  std::vector<T> o0;               // [n, d] o_proj output
  std::vector<T> o2, rstd_o;       // after the sandwich norm
  std::vector<T> mid;              // [n, d] residual after the attention branch
  std::vector<T> rstd_ffn, h2;     // [n], [n, d]
  std::vector<T> fgu;              // [n, 2 * ffn]: gate_proj | up_proj outputs, one product
  std::vector<T> fa;               // [n, ffn] SwiGLU output
  std::vector<T> f0, f1, rstd_f;   // [n, d] down_proj output, after sandwich norm
  SwitchHeadsState<T> sw;          // switch heads: routing and expert outputs (k0/v0 come from them)
};

template <typename T>
struct Model<T>::State {
  int64_t batch = 0, seq = 0, n = 0;
  bool for_backward = false;  // whether the buffers below include backward's
  std::vector<int32_t> tokens, targets;
  std::vector<int32_t> positions;  // [n] RoPE position of each row (forward_tokens); empty: t of [batch, seq]
  std::vector<std::vector<T>> resid;  // [n_layers + 1][n, d]: input of block l, last = output
  std::vector<LayerActivations<T>> layers;
  std::vector<std::unique_ptr<MoeBlock<T>>> moe;  // [n_layers]: the MoE FFN of each MoE layer, null elsewhere
  std::vector<double> balance_counts;  // [moe_layers * E] loads f_i counts over (set_balance_counts); empty: own
  bool routed_only = false;            // the last pass was route_counts (nothing for backward)
  std::vector<T> rstd_final, h_final, logits, losses, dlogits;
  std::vector<T> qkvg;  // [n, qkv_width]: the fused q|k|v(|gate) product, split into the layer's q0, k0, ...
  // Backward scratch, reused by every block.
  std::vector<T> dres, dh, da, db, dc, dq0, dq1, dq2, dk0, dk1, dk2, dv0, dv1, dfa, dfgu, dgate, dscore, dqkvg;
  SwitchHeadsScratch<T> sw_scratch;
};

namespace {

template <typename T>
void resize(std::vector<T>& v, int64_t size, bool needed = true) {
  v.assign(needed ? static_cast<size_t>(size) : 0, T(0));
}
template <typename T>
void zero(std::vector<T>& v) {
  std::fill(v.begin(), v.end(), T(0));
}

// Branch output post-processing: clip to (-c, c); backward passes the gradient where
// the value was inside [-c, c] (torch.clamp's convention).
template <typename T>
void add_clipped(T* out, const T* resid, const T* branch, int64_t size, double clip) {
  const T c = static_cast<T>(clip);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < size; ++i)
    out[i] = resid[i] + (clip > 0 ? std::clamp(branch[i], -c, c) : branch[i]);
}
template <typename T>
void clip_backward(T* dbranch, const T* dout, const T* branch, int64_t size, double clip) {
  const T c = static_cast<T>(clip);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < size; ++i)
    dbranch[i] = (clip <= 0 || (branch[i] >= -c && branch[i] <= c)) ? dout[i] : T(0);
}

// The attention's input projections are one product h [n, d] x [Wq; Wk; Wv; Wgate]^T
// (the layout keeps those rows adjacent). The gate joins it when it reads all of h.
bool gate_in_qkv_product(const ModelConfig& c) {
  return c.has_gate() && c.gate.input == GateInput::hidden && c.gate_in() == c.d_model;
}
// The multiply gate right after SDPA (G1) runs inside the attention kernels: the forward's
// epilogue writes Y' = Y * score, the backward reads dO = dY' * score and writes dscore.
bool gate_in_attention_epilogue(const ModelConfig& c) {
  return c.gate.position == GatePosition::sdpa && c.gate.combine == GateCombine::multiply &&
         c.sdpa_transform == SdpaTransform::none;
}
// Whether each layer keeps a copy of the gate's pre-activations: not when they sit in the
// fused product (forward reads them there in place) and backward can work from the score.
bool keeps_gate_pre(const ModelConfig& c) {
  return c.has_gate() && !(gate_in_qkv_product(c) && gate_grad_from_score(GateShape::of(c)));
}
// Switch heads compute k (experts_on kv) and v from their experts: those leave the product.
int64_t k_product_width(const ModelConfig& c) { return c.switch_heads.switches_k() ? 0 : c.kv_dim(); }
int64_t v_product_width(const ModelConfig& c) { return c.switch_heads.on() ? 0 : c.kv_dim(); }
// The first column of the gate's pre-activations in the fused product.
int64_t gate_product_column(const ModelConfig& c) { return c.q_dim() + k_product_width(c) + v_product_width(c); }
int64_t qkv_width(const ModelConfig& c) {
  return gate_product_column(c) + (gate_in_qkv_product(c) ? c.gate_out() : 0);
}
template <typename T>
SwitchHeadsWeights<T> switch_weights(const LayerViews<T>& w) {
  return {w.switch_router, w.k_experts, w.v_experts};
}

// A block of columns of a row-major [n, ld] matrix and its packed [n, width] copy.
template <typename T>
struct ColumnBlock {
  T* packed;  // null: skip the block's columns
  int64_t width;
};
// Copies the column blocks of src [n, ld], left to right, out to packed buffers.
template <typename T>
void split_columns(const T* src, int64_t n, int64_t ld, std::initializer_list<ColumnBlock<T>> blocks) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    int64_t col = 0;
    for (const ColumnBlock<T>& b : blocks) {
      if (b.packed) std::copy_n(src + r * ld + col, b.width, b.packed + r * b.width);
      col += b.width;
    }
  }
}
// The reverse: packed buffers side by side into dst [n, ld].
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

}  // namespace

template <typename T>
Model<T>::Model(const ModelConfig& config)
    : config_(config), layout_(config), params_(layout_.total()), s_(std::make_unique<State>()) {
  config_.validate();
  w_ = make_views(layout_, config_, params_.data());
  // The fused products rely on the layout's adjacency of their weights.
  const int64_t d = config_.d_model, qd = config_.q_dim(), kvd = config_.kv_dim();
  const int64_t kw = k_product_width(config_), vw = v_product_width(config_);
  for (const LayerViews<T>& w : w_.layers) {
    const bool adjacent = (!kw || w.wk == w.wq + qd * d) && (!vw || w.wv == w.wq + (qd + kw) * d) &&
                          (!gate_in_qkv_product(config_) || w.gate == w.wq + gate_product_column(config_) * d) &&
                          (!w.w_gate || w.w_up == w.w_gate + config_.ffn_hidden * d) &&
                          (!config_.attn_qkv_bias ||
                           (w.bk == w.bq + qd && w.bv == w.bk + kvd &&
                            (!config_.gate_has_bias() || w.bgate == w.bv + kvd)));
    if (!adjacent) fail("internal error: the parameter layout does not keep the fused projections adjacent");
  }
  s_->moe.resize(config_.n_layers);
  for (int64_t l = 0; l < config_.n_layers; ++l)
    if (config_.moe.is_moe_layer(l)) s_->moe[l] = std::make_unique<MoeBlock<T>>(config_.moe, d);
}

template <typename T>
Model<T>::~Model() = default;
template <typename T>
Model<T>::Model(Model&&) noexcept = default;

template <typename T>
void Model<T>::load_params(std::span<const T> values) {
  if (static_cast<int64_t>(values.size()) != layout_.total())
    fail("load_params: ", values.size(), " values for a model of ", layout_.total(), " parameters");
  std::copy(values.begin(), values.end(), params_.begin());
}

template <typename T>
void Model<T>::ensure_grads() {
  if (!grads_.empty()) return;
  grads_.assign(static_cast<size_t>(layout_.total()), T(0));
  g_ = make_views(layout_, config_, grads_.data());
}

template <typename T>
void Model<T>::zero_grads() {
  ensure_grads();
  zero(grads_);
}

template <typename T>
const T* Model<T>::logits() const {
  return s_->logits.data();
}
template <typename T>
const T* Model<T>::token_losses() const {
  return s_->losses.data();
}

template <typename T>
int64_t Model<T>::batch() const {
  return s_->batch;
}
template <typename T>
int64_t Model<T>::seq() const {
  return s_->seq;
}

template <typename T>
BlockProbe<T> Model<T>::probe(int64_t layer) const {
  const ModelConfig& c = config_;
  if (layer < 0 || layer >= c.n_layers || s_->n == 0) fail("probe: no layer ", layer, " in the last forward");
  const LayerActivations<T>& a = s_->layers[layer];
  const GatePosition gp = c.gate.position;
  const T* sdpa = c.sdpa_transform != SdpaTransform::none ? a.y1.data() : a.y0.data();
  const T* gate_y = nullptr;
  switch (gp) {
    case GatePosition::sdpa: gate_y = sdpa; break;
    case GatePosition::query: gate_y = a.q0.data(); break;
    case GatePosition::key: gate_y = a.k0.data(); break;
    case GatePosition::value: gate_y = a.v0.data(); break;
    case GatePosition::dense: gate_y = a.o0.data(); break;
    case GatePosition::none: break;
  }
  const bool gated = c.has_gate();
  return BlockProbe<T>{s_->resid[layer + 1].data(), a.qr.data(), a.kr.data(), sdpa, gate_y,
                       gated ? a.gated.data() : nullptr, gated ? a.gate_score.data() : nullptr,
                       c.switch_heads.on() ? &a.sw : nullptr};
}

template <typename T>
void Model<T>::ensure_buffers(int64_t batch, int64_t seq, bool for_backward) {
  State& s = *s_;
  if (s.batch == batch && s.seq == seq && s.for_backward == for_backward) return;
  const ModelConfig& c = config_;
  const int64_t n = batch * seq, d = c.d_model, qd = c.q_dim(), kvd = c.kv_dim(), f = c.ffn_hidden;
  const GateShape gs = GateShape::of(c);
  s.batch = batch;
  s.seq = seq;
  s.n = n;
  s.for_backward = for_backward;
  s.resid.assign(c.n_layers + 1, {});
  for (auto& r : s.resid) resize(r, n * d);
  s.layers.assign(c.n_layers, {});
  int64_t layer = 0;
  for (auto& a : s.layers) {
    const bool dense_ffn = !c.moe.is_moe_layer(layer++);
    resize(a.rstd_attn, n);
    resize(a.h, n * d);
    resize(a.q0, n * qd);
    resize(a.k0, n * kvd);
    resize(a.v0, n * kvd);
    resize(a.gate_pre, n * gs.gate_out, keeps_gate_pre(c));
    resize(a.gate_score, n * gs.target_size(), c.has_gate());
    resize(a.gated, n * gs.target_size(), c.has_gate());
    resize(a.qr, n * qd);
    resize(a.kr, n * kvd);
    resize(a.rstd_q, n * c.n_heads, c.qk_norm);
    resize(a.rstd_k, n * c.n_kv_heads, c.qk_norm);
    resize(a.y0, n * qd);
    resize(a.lse, n * c.n_heads);
    resize(a.y1, n * qd, c.sdpa_transform != SdpaTransform::none);
    resize(a.rstd_y, n * c.n_heads, c.sdpa_transform == SdpaTransform::rmsnorm);
    resize(a.o0, n * d);
    resize(a.o2, n * d, c.sandwich_norm);
    resize(a.rstd_o, n, c.sandwich_norm);
    resize(a.mid, n * d);
    resize(a.rstd_ffn, n);
    resize(a.h2, n * d);
    resize(a.fgu, n * 2 * f, dense_ffn);
    resize(a.fa, n * f, dense_ffn);
    resize(a.f0, n * d);
    resize(a.f1, n * d, c.sandwich_norm);
    resize(a.rstd_f, n, c.sandwich_norm);
  }
  resize(s.rstd_final, n);
  resize(s.h_final, n * d);
  resize(s.logits, n * c.vocab_size, for_backward);  // forward_tokens sizes it for the rows it keeps
  resize(s.losses, n);
  resize(s.qkvg, n * qkv_width(c));
  // Backward's buffers (none for forward_tokens).
  const bool bw = for_backward;
  resize(s.dlogits, n * c.vocab_size, bw);
  resize(s.dqkvg, n * qkv_width(c), bw);
  for (auto* v : {&s.dres, &s.dh, &s.da, &s.db, &s.dc}) resize(*v, n * std::max({d, qd}), bw);
  for (auto* v : {&s.dq0, &s.dq1, &s.dq2}) resize(*v, n * qd, bw);
  for (auto* v : {&s.dk0, &s.dk1, &s.dk2, &s.dv0, &s.dv1}) resize(*v, n * kvd, bw);
  resize(s.dfa, n * f, bw);
  resize(s.dfgu, n * 2 * f, bw);
  resize(s.dgate, n * gs.gate_out, bw && c.has_gate() && !gate_in_qkv_product(c));
  resize(s.dscore, n * gs.target_size(), bw && c.has_gate());
}

template <typename T>
double Model<T>::forward(const int32_t* tokens, const int32_t* targets, int64_t batch, int64_t seq) {
  const ModelConfig& c = config_;
  if (batch < 1 || seq < 1) fail("forward: empty batch (", batch, " x ", seq, ")");
  k::MatmulPrecisionScope precision(bf16_matmuls_);
  begin_forward(batch, seq);
  State& s = *s_;
  const int64_t n = s.n;
  s.targets.assign(n, -1);
  if (targets) s.targets.assign(targets, targets + n);
  for (int64_t r = 0; r < n; ++r)
    if (s.targets[r] >= c.vocab_size)
      fail("target id ", s.targets[r], " is outside the vocabulary (0..", c.vocab_size - 1, ")");
  embed(tokens);
  for (int64_t l = 0; l < c.n_layers; ++l) block_forward(l, nullptr);
  final_logits({});
  counted_ = 0;
  for (int32_t t : s.targets) counted_ += t >= 0;
  if (!targets || counted_ == 0) return 0.0;
  // The gradient of the logits is left to backward(): evaluation never pays for it.
  const double total = k::cross_entropy(s.losses.data(), static_cast<T*>(nullptr), s.logits.data(),
                                        s.targets.data(), n, c.vocab_size, T(0));
  return total / static_cast<double>(counted_);
}

// Buffers, the RoPE table and the state of a training-shaped forward of [batch, seq].
template <typename T>
void Model<T>::begin_forward(int64_t batch, int64_t seq) {
  ensure_buffers(batch, seq, /*for_backward=*/true);
  if (rope_.positions < seq && config_.rope_dims > 0)
    rope_ = model_rope_table(config_, std::max(seq, config_.max_seq_len));
  s_->positions.clear();
  s_->routed_only = false;
}

template <typename T>
std::vector<int64_t> Model<T>::route_counts(const int32_t* tokens, int64_t batch, int64_t seq) {
  const ModelConfig& c = config_;
  if (!c.has_moe()) return {};
  if (batch < 1 || seq < 1) fail("route_counts: empty batch (", batch, " x ", seq, ")");
  k::MatmulPrecisionScope precision(bf16_matmuls_);
  begin_forward(batch, seq);
  s_->targets.assign(s_->n, -1);
  embed(tokens);
  int64_t last = 0;
  for (int64_t l = 0; l < c.n_layers; ++l)
    if (c.moe.is_moe_layer(l)) last = l;
  for (int64_t l = 0; l <= last; ++l) block_forward(l, nullptr);
  s_->routed_only = true;
  counted_ = 0;
  return expert_counts();
}

template <typename T>
std::vector<int64_t> Model<T>::expert_counts() const {
  std::vector<int64_t> all;
  for (const auto& b : s_->moe)
    if (b) all.insert(all.end(), b->counts().begin(), b->counts().end());
  return all;
}

template <typename T>
void Model<T>::set_balance_counts(std::span<const double> counts) {
  const int64_t want = config_.moe.moe_layers(config_.n_layers) * config_.moe.n_experts;
  if (!counts.empty() && static_cast<int64_t>(counts.size()) != want)
    fail("set_balance_counts: ", counts.size(), " counts for ", want, " (MoE layers x experts)");
  s_->balance_counts.assign(counts.begin(), counts.end());
}

// f_i of MoE layer number `index` (0-based among the MoE layers): the share of the
// assignments that went to expert i, counted by set_balance_counts or by the last forward.
template <typename T>
std::vector<double> Model<T>::balance_shares(int64_t index) const {
  const int64_t E = config_.moe.n_experts;
  std::vector<double> f(E);
  if (!s_->balance_counts.empty()) {
    std::copy_n(s_->balance_counts.begin() + index * E, E, f.begin());
  } else {
    int64_t seen = 0;
    for (const auto& b : s_->moe)
      if (b && seen++ == index) std::copy(b->counts().begin(), b->counts().end(), f.begin());
  }
  double total = 0;
  for (double v : f) total += v;
  for (double& v : f) v = total > 0 ? v / total : 0.0;
  return f;
}

template <typename T>
MoeAuxLosses Model<T>::moe_aux() const {
  const MoeConfig& m = config_.moe;
  MoeAuxLosses aux;
  if (!m.enabled() || s_->n == 0) return aux;
  const double layers = static_cast<double>(m.moe_layers(config_.n_layers));
  int64_t index = 0;
  for (const auto& b : s_->moe) {
    if (!b) continue;
    const std::vector<double> f = balance_shares(index++);
    double lb = 0;
    for (int64_t e = 0; e < m.n_experts; ++e) lb += f[e] * b->mean_probs()[e];
    aux.lb += static_cast<double>(m.n_experts) * lb / layers;
    aux.z += b->z_loss() / layers;
  }
  aux.total = m.lb_coef * aux.lb + m.z_coef * aux.z;
  return aux;
}

template <typename T>
MoeTimes Model<T>::moe_times(bool reset) {
  MoeTimes sum;
  for (auto& b : s_->moe) {
    if (!b) continue;
    MoeTimes& t = b->times();
    sum.routing += t.routing;
    sum.permute += t.permute;
    sum.experts += t.experts;
    sum.shared += t.shared;
    if (reset) t = MoeTimes{};
  }
  return sum;
}

template <typename T>
const MoeBlock<T>* Model<T>::moe_block(int64_t layer) const {
  return layer >= 0 && layer < config_.n_layers ? s_->moe[layer].get() : nullptr;
}

template <typename T>
void Model<T>::forward_tokens(const int32_t* tokens, const int32_t* positions, int64_t n,
                              const AttentionFn<T>& attend, std::span<const int64_t> logit_rows) {
  const ModelConfig& c = config_;
  if (n < 1) fail("forward_tokens: no tokens");
  k::MatmulPrecisionScope precision(bf16_matmuls_);
  ensure_buffers(1, n, /*for_backward=*/false);
  State& s = *s_;
  const int32_t max_pos = *std::max_element(positions, positions + n);
  if (*std::min_element(positions, positions + n) < 0) fail("forward_tokens: a negative position");
  if (rope_.positions <= max_pos && c.rope_dims > 0)
    rope_ = model_rope_table(c, std::max<int64_t>(2 * int64_t{max_pos} + 1, c.max_seq_len));
  s.positions.assign(positions, positions + n);
  s.targets.assign(n, -1);
  counted_ = 0;
  embed(tokens);
  for (int64_t l = 0; l < c.n_layers; ++l) block_forward(l, &attend);
  final_logits(logit_rows);
}

// resid[0] = the embedding rows of tokens [n] (checked against the vocabulary).
template <typename T>
void Model<T>::embed(const int32_t* tokens) {
  const ModelConfig& c = config_;
  State& s = *s_;
  const int64_t n = s.n, d = c.d_model;
  s.tokens.assign(tokens, tokens + n);
  for (int64_t r = 0; r < n; ++r) {
    if (tokens[r] < 0 || tokens[r] >= c.vocab_size)
      fail("token id ", tokens[r], " is outside the vocabulary (0..", c.vocab_size - 1, ")");
    std::copy_n(w_.embed + static_cast<int64_t>(tokens[r]) * d, d, s.resid[0].data() + r * d);
  }
}

// Final norm and LM head: logits [rows, vocab] for the listed rows of the last block's
// output (every row when rows is empty; only those rows are normed and projected).
template <typename T>
void Model<T>::final_logits(std::span<const int64_t> rows) {
  const ModelConfig& c = config_;
  State& s = *s_;
  const int64_t d = c.d_model;
  const T* x = s.resid[c.n_layers].data();
  int64_t m = s.n;
  if (!rows.empty()) {  // gather the rows into resid[0], free once the blocks have run
    m = static_cast<int64_t>(rows.size());
    T* packed = s.resid[0].data();
    for (int64_t i = 0; i < m; ++i) {
      if (rows[i] < 0 || rows[i] >= s.n) fail("forward_tokens: logit row ", rows[i], " of ", s.n);
      std::copy_n(x + rows[i] * d, d, packed + i * d);
    }
    x = packed;
  }
  if (static_cast<int64_t>(s.logits.size()) < m * c.vocab_size) s.logits.resize(m * c.vocab_size);
  k::rmsnorm_forward(s.h_final.data(), s.rstd_final.data(), x, w_.final_norm, m, d, c.norm_eps);
  k::linear_forward(s.logits.data(), s.h_final.data(), w_.lm_head, m, d, c.vocab_size);
}

template <typename T>
void Model<T>::block_forward(int64_t l, const AttentionFn<T>* attend) {
  const ModelConfig& c = config_;
  State& s = *s_;
  LayerActivations<T>& a = s.layers[l];
  const LayerViews<T>& w = w_.layers[l];
  const int64_t n = s.n, d = c.d_model, qd = c.q_dim(), kvd = c.kv_dim(), f = c.ffn_hidden;
  const GatePosition gp = c.gate.position;
  const GateShape gs = GateShape::of(c);
  const T* x = s.resid[l].data();

  // Attention branch.
  k::rmsnorm_forward(a.h.data(), a.rstd_attn.data(), x, w.input_norm, n, d, c.norm_eps);
  const bool fused_gate = gate_in_qkv_product(c);
  const int64_t qkv_w = qkv_width(c);
  k::linear_forward(s.qkvg.data(), a.h.data(), w.wq, n, d, qkv_w);
  if (w.bq) k::bias_forward(s.qkvg.data(), w.bq, n, qkv_w);  // q|k|v(|gate) biases, adjacent
  split_columns<T>(s.qkvg.data(), n, qkv_w,
                   {{a.q0.data(), qd}, {a.k0.data(), k_product_width(c)}, {a.v0.data(), v_product_width(c)},
                    {keeps_gate_pre(c) ? a.gate_pre.data() : nullptr, fused_gate ? gs.gate_out : 0}});
  if (c.switch_heads.on())
    switch_heads_forward(a.k0.data(), a.v0.data(), a.sw, s.sw_scratch, a.h.data(), n, switch_weights(w), c);
  // The gate's pre-activations [n, gate_out]: in place in the fused product unless kept.
  const bool pre_in_place = fused_gate && !keeps_gate_pre(c);
  const T* pre = pre_in_place ? s.qkvg.data() + gate_product_column(c) : a.gate_pre.data();
  const int64_t ld_pre = pre_in_place ? qkv_w : gs.gate_out;
  if (c.has_gate() && !fused_gate) gate_project(a.gate_pre.data(), a.h.data(), w.gate, n, gs);
  auto gate = [&](const T* y_in) {
    gate_forward(a.gated.data(), a.gate_score.data(), y_in, pre, ld_pre, n, gs);
    return static_cast<const T*>(a.gated.data());
  };
  const T* q_in = gp == GatePosition::query ? gate(a.q0.data()) : a.q0.data();
  const T* k_in = gp == GatePosition::key ? gate(a.k0.data()) : a.k0.data();
  const T* v_in = gp == GatePosition::value ? gate(a.v0.data()) : a.v0.data();
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
  const k::AttentionShape as{s.batch, s.seq, c.n_heads, c.n_kv_heads, c.head_dim,
                             1.0 / std::sqrt(static_cast<double>(c.head_dim))};
  const bool epilogue_gate = gate_in_attention_epilogue(c);
  if (epilogue_gate) gate_scores(a.gate_score.data(), pre, ld_pre, n, gs);
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
  if (gp == GatePosition::sdpa && !epilogue_gate) y = gate(y);
  k::linear_forward(a.o0.data(), y, w.wo, n, qd, d);
  if (w.bo) k::bias_forward(a.o0.data(), w.bo, n, d);
  const T* o = a.o0.data();
  if (gp == GatePosition::dense) o = gate(o);
  if (c.sandwich_norm) {
    k::rmsnorm_forward(a.o2.data(), a.rstd_o.data(), o, w.attn_branch_norm, n, d, c.norm_eps);
    o = a.o2.data();
  }
  add_clipped(a.mid.data(), x, o, n * d, c.residual_clip);

  // FFN branch (dense SwiGLU, or the MoE block of model/moe.h).
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

template <typename T>
void Model<T>::backward() {
  const ModelConfig& c = config_;
  State& s = *s_;
  if (s.n == 0 || !s.for_backward || s.routed_only)
    fail("backward called before forward (forward_tokens and route_counts keep nothing for it)");
  ensure_grads();
  k::MatmulPrecisionScope precision(bf16_matmuls_);
  const int64_t n = s.n, d = c.d_model;
  // d loss / d logits = (softmax - onehot) / counted targets; zero when nothing is counted.
  const T scale = counted_ ? static_cast<T>(1.0 / static_cast<double>(counted_)) : T(0);
  k::cross_entropy_backward(s.dlogits.data(), s.logits.data(), s.losses.data(), s.targets.data(), n, c.vocab_size,
                            scale);
  // Logits -> final norm -> residual stream.
  std::vector<T>& dh = s.dh;
  zero(dh);
  k::linear_backward(dh.data(), g_.lm_head, s.dlogits.data(), s.h_final.data(), w_.lm_head, n, d,
                     c.vocab_size);
  zero(s.dres);
  k::rmsnorm_backward(s.dres.data(), g_.final_norm, dh.data(), s.resid[c.n_layers].data(), w_.final_norm,
                      s.rstd_final.data(), n, d);
  for (int64_t l = c.n_layers - 1; l >= 0; --l) block_backward(l);
  for (int64_t r = 0; r < n; ++r) {
    T* row = g_.embed + static_cast<int64_t>(s.tokens[r]) * d;
    const T* dr = s.dres.data() + r * d;
    for (int64_t i = 0; i < d; ++i) row[i] += dr[i];
  }
}

// On entry s.dres holds d loss / d resid[l + 1]; on exit d loss / d resid[l].
template <typename T>
void Model<T>::block_backward(int64_t l) {
  const ModelConfig& c = config_;
  State& s = *s_;
  LayerActivations<T>& a = s.layers[l];
  const LayerViews<T>& w = w_.layers[l];
  const LayerViews<T>& g = g_.layers[l];
  const int64_t n = s.n, d = c.d_model, qd = c.q_dim(), f = c.ffn_hidden;
  const GatePosition gp = c.gate.position;
  const GateShape gs = GateShape::of(c);
  T* dres = s.dres.data();

  // FFN branch: resid[l+1] = mid + clip(sandwich(f0)).
  T* df = s.da.data();
  clip_backward(df, dres, c.sandwich_norm ? a.f1.data() : a.f0.data(), n * d, c.residual_clip);
  if (c.sandwich_norm) {
    std::fill_n(s.db.data(), n * d, T(0));
    k::rmsnorm_backward(s.db.data(), g.ffn_branch_norm, df, a.f0.data(), w.ffn_branch_norm, a.rstd_f.data(),
                        n, d);
    df = s.db.data();
  }
  T* dh = s.dh.data();
  if (MoeBlock<T>* moe = s.moe[l].get()) {
    int64_t index = 0;  // among the MoE layers
    for (int64_t i = 0; i < l; ++i) index += s.moe[i] != nullptr;
    // d loss / d P_i = lb_coef / layers * E * f_i (the loss is the mean over MoE layers).
    const double layers = static_cast<double>(c.moe.moe_layers(c.n_layers));
    std::vector<double> lb_weight = balance_shares(index);
    for (double& v : lb_weight) v *= c.moe.lb_coef / layers * static_cast<double>(c.moe.n_experts);
    moe->backward(dh, MoeGrads<T>{g.moe_router, g.moe_experts, g.moe_shared, g.moe_shared_down, g.moe_shared_gate},
                  df, a.h2.data(),
                  MoeWeights<T>{w.moe_router, w.moe_experts, w.moe_shared, w.moe_shared_down, w.moe_shared_gate},
                  lb_weight, c.moe.z_coef / layers);
  } else {
    k::linear_backward(s.dfa.data(), g.w_down, df, a.fa.data(), w.w_down, n, f, d, /*accumulate_dx=*/false);
    k::swiglu_backward(s.dfgu.data(), s.dfa.data(), a.fgu.data(), n, f);
    k::linear_backward(dh, g.w_gate, s.dfgu.data(), a.h2.data(), w.w_gate, n, d, 2 * f, /*accumulate_dx=*/false);
  }
  k::rmsnorm_backward(dres, g.ffn_norm, dh, a.mid.data(), w.ffn_norm, a.rstd_ffn.data(), n, d);

  // Attention branch: mid = x + clip(sandwich(gate_dense(o0))).
  const T* o1 = gp == GatePosition::dense ? a.gated.data() : a.o0.data();
  T* d_o = s.da.data();
  clip_backward(d_o, dres, c.sandwich_norm ? a.o2.data() : o1, n * d, c.residual_clip);
  if (c.sandwich_norm) {
    std::fill_n(s.db.data(), n * d, T(0));
    k::rmsnorm_backward(s.db.data(), g.attn_branch_norm, d_o, o1, w.attn_branch_norm, a.rstd_o.data(), n, d);
    d_o = s.db.data();
  }
  // The gate's backward writes d loss / d pre into the gate's columns of the fused
  // gradient (or s.dgate when its projection is separate); the projection's backward
  // comes last, with q, k and v's. pre is null when not kept (backward uses the score).
  const bool fused_gate = gate_in_qkv_product(c);
  const int64_t qkv_w = qkv_width(c);
  T* dpre = fused_gate ? s.dqkvg.data() + gate_product_column(c) : s.dgate.data();
  const int64_t ld_dpre = fused_gate ? qkv_w : gs.gate_out;
  const T* pre = keeps_gate_pre(c) ? a.gate_pre.data() : nullptr;
  if (gp == GatePosition::dense) {
    std::fill_n(s.dc.data(), n * d, T(0));
    gate_backward(s.dc.data(), dpre, ld_dpre, s.dscore.data(), d_o, a.o0.data(), pre, gs.gate_out,
                  a.gate_score.data(), n, gs);
    d_o = s.dc.data();
  }
  // o0 = y_final W_o^T, y_final = gate_sdpa(transform(y0)).
  const T* y1 = c.sdpa_transform != SdpaTransform::none ? a.y1.data() : a.y0.data();
  const T* y2 = gp == GatePosition::sdpa ? a.gated.data() : y1;
  T* dy = s.dq0.data();
  zero(s.dq0);
  if (g.bo) k::bias_backward(g.bo, d_o, n, d);
  k::linear_backward(dy, g.wo, d_o, y2, w.wo, n, qd, d);
  const bool epilogue_gate = gate_in_attention_epilogue(c);  // then dy stays d loss / d Y' for the kernel
  if (gp == GatePosition::sdpa && !epilogue_gate) {
    zero(s.dq1);
    gate_backward(s.dq1.data(), dpre, ld_dpre, s.dscore.data(), dy, y1, pre, gs.gate_out, a.gate_score.data(),
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
  // SDPA: gradients w.r.t. the roped q, k and the (possibly gated) v.
  const T* v_in = gp == GatePosition::value ? a.gated.data() : a.v0.data();
  zero(s.dq2);
  zero(s.dk0);
  zero(s.dv0);
  const k::AttentionShape as{s.batch, s.seq, c.n_heads, c.n_kv_heads, c.head_dim,
                             1.0 / std::sqrt(static_cast<double>(c.head_dim))};
  // The elementwise sigmoid gate's whole backward runs in the kernel: it writes dpre into
  // the gate's columns directly; other gates get dscore and finish below.
  const bool dpre_in_kernel = epilogue_gate && c.gate.granularity == GateGranularity::elementwise &&
                              !c.gate.head_shared && c.gate.activation == k::Activation::sigmoid;
  T* dgate_out = !epilogue_gate ? nullptr : dpre_in_kernel ? dpre : s.dscore.data();
  k::attention_backward(s.dq2.data(), s.dk0.data(), s.dv0.data(), dy, a.qr.data(), a.kr.data(), v_in,
                        a.y0.data(), a.lse.data(), as, epilogue_gate ? a.gate_score.data() : nullptr, dgate_out,
                        dpre_in_kernel ? k::GateGradLayout{ld_dpre, true} : k::GateGradLayout{});
  if (epilogue_gate && !dpre_in_kernel)
    gate_scores_backward(dpre, ld_dpre, s.dscore.data(), pre, gs.gate_out, a.gate_score.data(), n, gs);
  if (c.rope_dims > 0) {
    k::rope_apply(s.dq2.data(), rope_, s.batch, s.seq, c.n_heads, c.head_dim, 0, true);
    k::rope_apply(s.dk0.data(), rope_, s.batch, s.seq, c.n_kv_heads, c.head_dim, 0, true);
  }
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
    gate_backward(out, dpre, ld_dpre, s.dscore.data(), dq, a.q0.data(), pre, gs.gate_out, a.gate_score.data(),
                  n, gs);
    dq = out;
  } else if (gp == GatePosition::key) {
    zero(s.dk2);
    gate_backward(s.dk2.data(), dpre, ld_dpre, s.dscore.data(), dk, a.k0.data(), pre, gs.gate_out,
                  a.gate_score.data(), n, gs);
    dk = s.dk2.data();
  } else if (gp == GatePosition::value) {
    zero(s.dv1);
    gate_backward(s.dv1.data(), dpre, ld_dpre, s.dscore.data(), dv, a.v0.data(), pre, gs.gate_out,
                  a.gate_score.data(), n, gs);
    dv = s.dv1.data();
  }
  // d loss / d h and the weight gradients of q|k|v(|gate), one product each (the gate's
  // columns hold dpre already).
  gather_columns<T>(s.dqkvg.data(), n, qkv_w, {{dq, qd}, {dk, k_product_width(c)}, {dv, v_product_width(c)}});
  if (g.bq) k::bias_backward(g.bq, s.dqkvg.data(), n, qkv_w);
  k::linear_backward(dh, g.wq, s.dqkvg.data(), a.h.data(), w.wq, n, d, qkv_w, /*accumulate_dx=*/false);
  if (c.has_gate() && !fused_gate)
    gate_project_backward(dh, g.gate, s.dgate.data(), a.h.data(), w.gate, n, gs);
  if (c.switch_heads.on())
    switch_heads_backward(dh, SwitchHeadsGrads<T>{g.switch_router, g.k_experts, g.v_experts}, s.sw_scratch, dk, dv,
                          a.h.data(), a.sw, switch_weights(w), c);
  k::rmsnorm_backward(dres, g.input_norm, dh, s.resid[l].data(), w.input_norm, a.rstd_attn.data(), n, d);
}

template class Model<float>;
template class Model<double>;

}  // namespace gatedlm::model
