// The Gated DeltaNet layer (model/gated_deltanet.h) on its own: its backward against fp64
// central finite differences over sequences longer than one chunk of the delta rule, with
// n_v = n_k and n_v = 2 n_k, value heads grouped and tiled; and the incremental path (runs carrying the convolution history
// and the delta-rule state) against the training-shaped forward.
#include <gtest/gtest.h>

#include "core/rng.h"
#include "model/gated_deltanet.h"
#include "test_util.h"

namespace gatedlm::model {
namespace {

using testing::random_vector;
using testing::rel_error;

// All of one layer's weights in one buffer, with views.
template <typename T>
struct OneLayerWeights {
  DeltaNetShape shape;
  std::vector<T> data;
  int64_t in_proj, conv, dt_bias, A_log, norm, out_proj;
  explicit OneLayerWeights(const DeltaNetShape& s, uint64_t seed) : shape(s) {
    const LinearAttentionConfig& la = s.la;
    int64_t at = 0;
    auto take = [&](int64_t size) { return std::exchange(at, at + size); };
    in_proj = take(la.in_width() * s.d_model);
    conv = take(la.conv_dim() * la.conv_kernel);
    dt_bias = take(la.n_v_heads);
    A_log = take(la.n_v_heads);
    norm = take(la.v_head_dim);
    out_proj = take(s.d_model * la.value_dim());
    data = random_vector<T>(at, seed, 0.5);
    for (int64_t i = 0; i < la.n_v_heads; ++i) data[A_log + i] = static_cast<T>(-1.0 + 0.3 * i);  // decays ~0.3-0.6
    for (int64_t i = 0; i < la.v_head_dim; ++i) data[norm + i] += T(1);
  }
  template <typename P>
  auto views(P* base) const {
    return std::tuple{base + in_proj, base + conv, base + dt_bias, base + A_log, base + norm, base + out_proj};
  }
  DeltaNetWeights<T> weights() const {
    auto [a, b, c, d, e, f] = views(data.data());
    return {a, b, c, d, e, f};
  }
};

DeltaNetShape shape_of(int64_t n_k, int64_t n_v, ValueHeadOrder order = ValueHeadOrder::grouped) {
  return {{n_k, n_v, /*k_head_dim=*/3, /*v_head_dim=*/2, /*conv_kernel=*/3, order}, /*d_model=*/5, 1e-6};
}

// loss = sum(out * R): d loss / d out = R.
double layer_loss(const OneLayerWeights<double>& w, const std::vector<double>& h, const std::vector<double>& R,
                  int64_t batch, int64_t seq) {
  DeltaNetActivations<double> a;
  std::vector<double> out(R.size());
  deltanet_forward(out.data(), h.data(), batch, seq, w.shape, w.weights(), a);
  double loss = 0;
  for (size_t i = 0; i < out.size(); ++i) loss += out[i] * R[i];
  return loss;
}

// The finite-difference step: the layer's third derivatives are large at these weights (the
// error of the central difference fell from 1e-3 to 1e-5 to below 1e-6 with steps of 1e-4,
// 1e-5 and 1e-6: truncation, not a wrong gradient).
constexpr double kStep = 1e-6;

struct Heads {
  int64_t n_k, n_v;
  ValueHeadOrder order;
};

class DeltaNetGradient : public ::testing::TestWithParam<Heads> {};

TEST_P(DeltaNetGradient, MatchesFiniteDifferencesOverTwoChunks) {
  const DeltaNetShape s = shape_of(GetParam().n_k, GetParam().n_v, GetParam().order);
  const int64_t batch = 2, seq = 70;  // the chunk is 64: the state crosses a chunk boundary
  OneLayerWeights<double> w(s, 3);
  std::vector<double> h = random_vector<double>(batch * seq * s.d_model, 4);
  const std::vector<double> R = random_vector<double>(batch * seq * s.d_model, 5);

  DeltaNetActivations<double> a;
  std::vector<double> out(R.size()), dh(h.size()), grads(w.data.size(), 0.0);
  deltanet_forward(out.data(), h.data(), batch, seq, s, w.weights(), a);
  auto [gi, gc, gd, ga, gn, go] = w.views(grads.data());
  DeltaNetScratch<double> scratch;
  deltanet_backward(dh.data(), DeltaNetGrads<double>{gi, gc, gd, ga, gn, go}, R.data(), h.data(), batch, seq, s,
                    w.weights(), a, scratch);

  const std::vector<double> numeric_w = testing::numeric_grad(w.data, [&] { return layer_loss(w, h, R, batch, seq); }, kStep);
  EXPECT_LT(rel_error(grads, numeric_w), 1e-6);
  // Each tensor on its own, so a wrong small one is not hidden by a large one.
  const int64_t bounds[] = {w.in_proj, w.conv, w.dt_bias, w.A_log, w.norm, w.out_proj,
                            static_cast<int64_t>(w.data.size())};
  for (int t = 0; t < 6; ++t) {
    const std::vector<double> got(grads.begin() + bounds[t], grads.begin() + bounds[t + 1]);
    const std::vector<double> want(numeric_w.begin() + bounds[t], numeric_w.begin() + bounds[t + 1]);
    EXPECT_LT(rel_error(got, want), 1e-6) << "tensor " << t;
  }
  const std::vector<double> numeric_h =
      testing::numeric_grad(h, [&] { return layer_loss(w, h, R, batch, seq); }, kStep);
  EXPECT_LT(rel_error(dh, numeric_h), 1e-6);
}

INSTANTIATE_TEST_SUITE_P(KeyAndValueHeads, DeltaNetGradient,
                         ::testing::Values(Heads{2, 2, ValueHeadOrder::grouped}, Heads{1, 2, ValueHeadOrder::grouped},
                                           Heads{2, 4, ValueHeadOrder::grouped}, Heads{2, 4, ValueHeadOrder::tiled}),
                         [](const auto& info) {
                           const Heads& h = info.param;
                           return "nk" + std::to_string(h.n_k) + "_nv" + std::to_string(h.n_v) + "_" + to_string(h.order);
                         });

// One sequence through runs of the given lengths (each continuing the last) equals the
// training-shaped forward of the whole sequence.
void expect_runs_match_forward(const std::vector<int64_t>& lengths) {
  const DeltaNetShape s = shape_of(1, 2);
  OneLayerWeights<float> w(s, 8);
  int64_t total = 0;
  for (int64_t len : lengths) total += len;
  const std::vector<float> h = random_vector<float>(total * s.d_model, 9);
  DeltaNetActivations<float> a;
  std::vector<float> want(h.size()), got;
  deltanet_forward(want.data(), h.data(), 1, total, s, w.weights(), a);

  std::vector<float> conv(conv_state_size(s.la), 123.0f), delta(delta_state_size(s.la), -7.0f);  // garbage: fresh ignores it
  int64_t done = 0;
  for (int64_t len : lengths) {
    std::vector<float> out(len * s.d_model);
    const DeltaNetRun<float> run{0, len, {conv.data(), delta.data()}, done == 0};
    deltanet_forward_runs<float>(out.data(), h.data() + done * s.d_model, len, std::span(&run, 1), s, w.weights(), a);
    got.insert(got.end(), out.begin(), out.end());
    done += len;
  }
  EXPECT_LT(rel_error(got, want), 2e-6);
}

TEST(DeltaNetRuns, PrefillThenDecodeEqualsForward) { expect_runs_match_forward({20, 1, 1, 1, 2, 1}); }
TEST(DeltaNetRuns, ChunkedPrefillsInPiecesEqualForward) { expect_runs_match_forward({70, 30, 17}); }
TEST(DeltaNetRuns, ShortRunsShorterThanTheKernelEqualForward) { expect_runs_match_forward({1, 1, 2, 1, 3}); }

}  // namespace
}  // namespace gatedlm::model
