#include "model/model.h"

#include <algorithm>
#include <initializer_list>
#include <type_traits>

#include "core/error.h"
#include "kernels/cross_entropy.h"
#include "kernels/matmul.h"
#include "kernels/quant_matmul.h"
#include "kernels/rmsnorm.h"
#include "model/mixer.h"

namespace gatedlm::model {

namespace k = kernels;
using namespace detail;

namespace {

template <typename T>
void resize(std::vector<T>& v, int64_t size, bool needed = true) {
  v.assign(needed ? static_cast<size_t>(size) : 0, T(0));
}

}  // namespace

template <typename T>
Model<T>::Model(const ModelConfig& config)
    : config_(config), layout_(config), params_(layout_.total()), s_(std::make_unique<State>()) {
  config_.validate();
  w_ = make_views<T, kernels::Weight<T>>(layout_, config_, params_.data());
  const int64_t d = config_.d_model;
  for (int64_t l = 0; l < config_.n_layers; ++l) {
    mixers_.push_back(&layer_mixer<T>(config_, l));
    // The fused products rely on the layout's adjacency of their weights: the mixer's, and
    // gate_proj|up_proj of the dense FFN.
    const LayerWeights<T>& w = w_.layers[l];
    mixers_.back()->check_layout(l, config_, w, layout_, params_.data());
    if (w.w_gate && w.w_up.values != w.w_gate.values + config_.ffn_hidden * d)
      fail("internal error: the parameter layout does not keep the FFN's gate and up projections adjacent");
  }
  s_->moe.resize(config_.n_layers);
  for (int64_t l = 0; l < config_.n_layers; ++l)
    if (config_.moe.is_moe_layer(l)) s_->moe[l] = std::make_unique<MoeBlock<T>>(config_.moe, d);
  if (config_.norm_zero_centered) redirect_zero_centered_norms();
}

// Points the views of every zero-centred norm at its slot in norm_scales_ (1 + w, made by
// refresh_zero_centered_norms). The linear layers' gated norm (linear_norm) stays plain.
template <typename T>
void Model<T>::redirect_zero_centered_norms() {
  std::vector<std::pair<T*, T*>> moved;  // (view into params_, view into norm_scales_)
  int64_t size = 0;
  for (const ParamSpec& spec : layout_.specs())
    if (spec.kind == ParamKind::norm) {
      norm_offsets_.push_back({spec.offset, size});
      size += spec.numel;
    }
  norm_scales_.assign(static_cast<size_t>(size), T(1));
  for (auto [from, to] : norm_offsets_) moved.push_back({params_.data() + from, norm_scales_.data() + to});
  auto redirect = [&](T*& view) {
    for (auto [from, to] : moved)
      if (view == from) view = to;
  };
  redirect(w_.final_norm);
  for (LayerWeights<T>& w : w_.layers)
    for (T** view : {&w.input_norm, &w.q_norm, &w.k_norm, &w.sdpa_norm, &w.ffn_norm, &w.attn_branch_norm,
                     &w.ffn_branch_norm})
      redirect(*view);
}

template <typename T>
void Model<T>::refresh_zero_centered_norms() {
  for (size_t i = 0; i < norm_offsets_.size(); ++i) {
    const auto [from, to] = norm_offsets_[i];
    const int64_t end = i + 1 < norm_offsets_.size() ? norm_offsets_[i + 1].second : static_cast<int64_t>(norm_scales_.size());
    for (int64_t j = 0; j < end - to; ++j) norm_scales_[to + j] = T(1) + params_[from + j];
  }
}

template <typename T>
void Model<T>::attach_weight_store(const kernels::WeightStore* store) {
  if constexpr (std::is_same_v<T, float>) {
    for_each_matrix(w_, [&](kernels::Weight<T>& w) {
      if (w) w = store ? store->weight(w.values) : kernels::Weight<T>(w.values);
    });
    embed_rows_ = store ? store->weight(w_.embed) : kernels::Weight<T>(w_.embed);
  } else if (store) {
    fail("attach_weight_store: stored weights are for float models");
  }
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

// What the layer's mixer shows of one pass (g: the gradients, in a backward).
template <typename T>
MixerPass<T> Model<T>::mixer_pass(int64_t l, const AttentionFn<T>* attend, bool for_backward) {
  State& s = *s_;
  return MixerPass<T>{l,       config_, s, s.acts(l),   w_.layers[l], for_backward ? &g_.layers[l] : nullptr,
                      rope_,   attend,  linear_state_};
}

template <typename T>
BlockProbe<T> Model<T>::probe(int64_t layer) const {
  const ModelConfig& c = config_;
  if (layer < 0 || layer >= c.n_layers || s_->n == 0) fail("probe: no layer ", layer, " in the last forward");
  if (!s_->for_backward) fail("probe: the last forward was incremental (forward_tokens) and kept no layer's tensors");
  const LayerActivations<T>& a = s_->layers[layer];
  BlockProbe<T> p;
  p.resid_out = s_->resid[layer + 1].data();
  mixers_[layer]->probe(p, a, c);
  return p;
}

template <typename T>
bool Model<T>::attention_probs(T* probs, int64_t layer, int64_t b) const {
  const State& s = *s_;
  if (layer < 0 || layer >= config_.n_layers || s.n == 0) fail("attention_probs: no layer ", layer, " in the last forward");
  if (!s.positions.empty()) fail("attention_probs: the last forward was incremental (forward_tokens)");
  if (b < 0 || b >= s.batch) fail("attention_probs: no batch row ", b, " of ", s.batch);
  return mixers_[layer]->attention_probs(probs, s.layers[layer], w_.layers[layer], config_, s.batch, s.seq, b);
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
  // Backward reads every block's tensors; forward_tokens needs one set (model_state.h),
  // sized for every layer: a dense FFN if any layer has one, each kind of mixer's tensors.
  s.layers.assign(for_backward ? c.n_layers : 1, {});
  bool any_dense_ffn = false;
  for (int64_t l = 0; l < c.n_layers; ++l) any_dense_ffn = any_dense_ffn || !c.moe.is_moe_layer(l);
  for (int64_t i = 0; i < static_cast<int64_t>(s.layers.size()); ++i) {
    LayerActivations<T>& a = s.layers[i];
    const bool dense_ffn = for_backward ? !c.moe.is_moe_layer(i) : any_dense_ffn;
    resize(a.rstd_attn, n);
    resize(a.h, n * d);
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
    for (int64_t l = 0; l < c.n_layers; ++l)  // the mixer's own tensors (mixer.h): layer i's, or each kind's once
      if (for_backward ? l == i : std::find(mixers_.begin(), mixers_.begin() + l, mixers_[l]) == mixers_.begin() + l)
        mixers_[l]->resize(a, n, c);
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
  s.hooks.forward(-1, HookPoint::logits, s.logits.data(), {c.vocab_size});
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
  refresh_zero_centered_norms();
  if (rope_.positions < seq && config_.rope_dims > 0)
    rope_ = model_rope_table(config_, std::max(seq, config_.max_seq_len));
  s_->positions.clear();
  s_->routed_only = false;
  s_->hooks = HookCaller<T>{hooks_, batch, seq};
  s_->backward_refused.clear();
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
DeltaNetTimes Model<T>::deltanet_times(bool reset) {
  const DeltaNetTimes sum = s_->lin_times;
  if (reset) s_->lin_times = DeltaNetTimes{};
  return sum;
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
                              const AttentionFn<T>& attend, std::span<const int64_t> logit_rows,
                              const LinearStateFn<T>& linear_state) {
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
  s.hooks = HookCaller<T>{};  // incremental passes call no hooks (hooks.h)
  s.targets.assign(n, -1);
  counted_ = 0;
  refresh_zero_centered_norms();
  linear_state_ = &linear_state;
  embed(tokens);
  for (int64_t l = 0; l < c.n_layers; ++l) block_forward(l, &attend);
  linear_state_ = nullptr;
  final_logits(logit_rows);
}

// resid[0] = the embedding rows of tokens [n] (checked against the vocabulary): copied, or
// expanded from the blocks when the embedding is stored (a quantised model).
template <typename T>
void Model<T>::embed(const int32_t* tokens) {
  const ModelConfig& c = config_;
  State& s = *s_;
  const int64_t n = s.n, d = c.d_model;
  s.tokens.assign(tokens, tokens + n);
  for (int64_t r = 0; r < n; ++r) {
    if (tokens[r] < 0 || tokens[r] >= c.vocab_size)
      fail("token id ", tokens[r], " is outside the vocabulary (0..", c.vocab_size - 1, ")");
    T* out = s.resid[0].data() + r * d;
    if constexpr (std::is_same_v<T, float>) {
      if (embed_rows_.is_stored()) {
        kernels::quant_dequantize_rows(out, embed_rows_.stored.matrix, embed_rows_.stored.row0 + tokens[r], 1);
        continue;
      }
    }
    std::copy_n(w_.embed + static_cast<int64_t>(tokens[r]) * d, d, out);
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
void Model<T>::backward() {
  const ModelConfig& c = config_;
  State& s = *s_;
  if (s.n == 0 || !s.for_backward || s.routed_only)
    fail("backward called before forward (forward_tokens and route_counts keep nothing for it)");
  ensure_grads();
  // d loss / d logits = (softmax - onehot) / counted targets; zero when nothing is counted.
  const T scale = counted_ ? static_cast<T>(1.0 / static_cast<double>(counted_)) : T(0);
  k::cross_entropy_backward(s.dlogits.data(), s.logits.data(), s.losses.data(), s.targets.data(), s.n, c.vocab_size,
                            scale);
  s.seeded_logits = false;
  backward_from_seed();
}

template <typename T>
void Model<T>::backward_from_logits(std::span<const T> dlogits) {
  State& s = *s_;
  if (s.n == 0 || !s.for_backward || s.routed_only)
    fail("backward called before forward (forward_tokens and route_counts keep nothing for it)");
  if (static_cast<int64_t>(dlogits.size()) != s.n * config_.vocab_size)
    fail("backward_from_logits: ", dlogits.size(), " values for ", s.n, " x ", config_.vocab_size, " logits");
  ensure_grads();
  std::copy(dlogits.begin(), dlogits.end(), s.dlogits.begin());
  s.seeded_logits = true;
  backward_from_seed();
}

// From s.dlogits back to the embedding, accumulating every gradient.
template <typename T>
void Model<T>::backward_from_seed() {
  const ModelConfig& c = config_;
  State& s = *s_;
  if (!s.backward_refused.empty()) fail("backward: ", s.backward_refused);
  k::MatmulPrecisionScope precision(bf16_matmuls_);
  const int64_t n = s.n, d = c.d_model;
  s.hooks.gradient(-1, HookPoint::logits, s.dlogits.data(), {c.vocab_size});
  // Logits -> final norm -> residual stream.
  std::vector<T>& dh = s.dh;
  zero(dh);
  k::linear_backward(dh.data(), g_.lm_head, s.dlogits.data(), s.h_final.data(), w_.lm_head.values, n, d,
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

template class Model<float>;
template class Model<double>;

}  // namespace gatedlm::model
