// The gated delta rule (kernels/delta_rule.h): the chunked form against the recurrence, the
// recurrence's backward against fp64 finite differences, float against double.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "kernels/delta_rule.h"
#include "test_util.h"

namespace gatedlm::kernels {
namespace {

using testing::numeric_grad;
using testing::random_vector;
using testing::rel_error;

// Inputs as a layer hands them over: q, k L2-normalised per head, q scaled by 1/sqrt(d_k),
// g = log decay in [-(least + span), -least] (by default about [-1.3, -0.01]: decays 0.27 to
// 0.99), beta in (0, 1).
struct DeltaProblem {
  DeltaRuleShape shape;
  std::vector<double> q, k, v, g, beta, initial;  // initial empty: none
};

void normalise_rows(std::vector<double>& x, int64_t width, double scale) {
  for (size_t row = 0; row < x.size(); row += width) {
    double norm = 0;
    for (int64_t i = 0; i < width; ++i) norm += x[row + i] * x[row + i];
    for (int64_t i = 0; i < width; ++i) x[row + i] *= scale / std::sqrt(norm);
  }
}

DeltaProblem make_delta_problem(DeltaRuleShape s, bool with_initial, uint64_t seed, double least = 0.01,
                                double span = 1.3) {
  const int64_t rows = s.batch * s.seq * s.heads;
  DeltaProblem p{s, random_vector(rows * s.key_dim, seed), random_vector(rows * s.key_dim, seed + 1),
            random_vector(rows * s.value_dim, seed + 2), std::vector<double>(rows), std::vector<double>(rows), {}};
  normalise_rows(p.q, s.key_dim, 1 / std::sqrt(static_cast<double>(s.key_dim)));
  normalise_rows(p.k, s.key_dim, 1.0);
  Rng rng(seed + 3);
  for (int64_t i = 0; i < rows; ++i) {
    p.g[i] = -least - span * rng.uniform();
    p.beta[i] = 1 / (1 + std::exp(-rng.normal()));
  }
  if (with_initial) p.initial = random_vector(s.batch * s.heads * s.key_dim * s.value_dim, seed + 4, 0.5);
  return p;
}

template <typename To, typename From>
std::vector<To> cast(const std::vector<From>& x) {
  return std::vector<To>(x.begin(), x.end());
}

// The problem's inputs in precision T, kept alive beside the pointers that name them.
template <typename T>
struct Typed {
  std::vector<T> q, k, v, g, beta, initial;
  explicit Typed(const DeltaProblem& p)
      : q(cast<T>(p.q)), k(cast<T>(p.k)), v(cast<T>(p.v)), g(cast<T>(p.g)), beta(cast<T>(p.beta)),
        initial(cast<T>(p.initial)) {}
  DeltaRuleInputs<T> inputs() const {
    return {q.data(), k.data(), v.data(), g.data(), beta.data(), initial.empty() ? nullptr : initial.data()};
  }
};

struct Result {
  std::vector<double> out, state;
};

size_t out_size(const DeltaRuleShape& s) { return s.batch * s.seq * s.heads * s.value_dim; }
size_t state_size(const DeltaRuleShape& s) { return s.batch * s.heads * s.key_dim * s.value_dim; }

// chunk_size 0: the recurrence.
template <typename T>
Result run_forward(const DeltaProblem& p, int64_t chunk_size) {
  const Typed<T> in(p);
  std::vector<T> out(out_size(p.shape)), state(state_size(p.shape));
  if (chunk_size == 0)
    delta_rule_recurrent_forward(out.data(), state.data(), in.inputs(), p.shape);
  else
    delta_rule_chunked_forward(out.data(), state.data(), in.inputs(), p.shape, chunk_size);
  return {cast<double>(out), cast<double>(state)};
}

// The gradients of the recurrence's backward, in double whatever T ran.
struct Grads {
  std::vector<double> dq, dk, dv, dg, dbeta, d_initial;
};

// chunk_size 0: the recurrence's backward.
template <typename T>
Grads run_backward(const DeltaProblem& p, const std::vector<double>& d_out, const std::vector<double>* d_final,
                   int64_t chunk_size = 0) {
  const Typed<T> in(p);
  const DeltaRuleShape& s = p.shape;
  const size_t keys = s.batch * s.seq * s.heads * s.key_dim, scalars = s.batch * s.seq * s.heads;
  std::vector<T> dq(keys), dk(keys), dv(out_size(s)), dg(scalars), dbeta(scalars), d_initial(state_size(s));
  const std::vector<T> d_out_t = cast<T>(d_out), d_final_t = d_final ? cast<T>(*d_final) : std::vector<T>();
  const DeltaRuleGrads<T> grads{dq.data(), dk.data(), dv.data(), dg.data(), dbeta.data(), d_initial.data()};
  const T* d_final_ptr = d_final ? d_final_t.data() : nullptr;
  if (chunk_size == 0)
    delta_rule_recurrent_backward<T>(grads, d_out_t.data(), d_final_ptr, in.inputs(), s);
  else
    delta_rule_chunked_backward<T>(grads, d_out_t.data(), d_final_ptr, in.inputs(), s, chunk_size);
  return {cast<double>(dq), cast<double>(dk), cast<double>(dv), cast<double>(dg), cast<double>(dbeta),
          cast<double>(d_initial)};
}

void expect_grads_near(const Grads& got, const Grads& expected, double bound) {
  EXPECT_LT(rel_error(got.dq, expected.dq), bound) << "dq";
  EXPECT_LT(rel_error(got.dk, expected.dk), bound) << "dk";
  EXPECT_LT(rel_error(got.dv, expected.dv), bound) << "dv";
  EXPECT_LT(rel_error(got.dg, expected.dg), bound) << "dg";
  EXPECT_LT(rel_error(got.dbeta, expected.dbeta), bound) << "dbeta";
  EXPECT_LT(rel_error(got.d_initial, expected.d_initial), bound) << "d initial state";
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  return std::inner_product(a.begin(), a.end(), b.begin(), 0.0);
}

// A shape with every dimension distinct (d_k != d_v), several heads and sequences, and a
// length that no chunk size below divides except 1 and 5.
constexpr DeltaRuleShape kDeltaShape{.batch = 2, .seq = 45, .heads = 3, .key_dim = 8, .value_dim = 12};

// In double the two forms are the same function, up to rounding: the bound 1e-11 is far
// above double rounding over these sums (measured 7e-16) and far below any mistake in a
// decay factor, a mask or the carried state (relative errors of 1e-3 and up). Chunk sizes
// 1 (pure recurrence through the products), 5 (divides 45), 16 and 32 (a short last chunk)
// and 64 (one chunk shorter than C).
TEST(DeltaRuleTest, ChunkedMatchesRecurrenceInDouble) {
  for (bool with_initial : {false, true}) {
    const DeltaProblem p = make_delta_problem(kDeltaShape, with_initial, 11);
    const Result reference = run_forward<double>(p, 0);
    for (int64_t chunk : {1, 5, 16, 32, 64}) {
      SCOPED_TRACE(::testing::Message() << "chunk " << chunk << " initial state " << with_initial);
      const Result chunked = run_forward<double>(p, chunk);
      EXPECT_LT(rel_error(chunked.out, reference.out), 1e-11);
      EXPECT_LT(rel_error(chunked.state, reference.state), 1e-11);
    }
  }
}

// Float through oneDNN (the chunked form) and by hand (the recurrence) against the double
// recurrence, at widths where oneDNN's blocked kernels run. 2e-5 relative: float rounding
// (6e-8) grown over sums of 32-64 terms and 200 decayed steps (measured 5e-7) with room for
// another summation order on another CPU; a wrong factor anywhere gives 1e-2 or more.
TEST(DeltaRuleTest, FloatFormsMatchDoubleRecurrence) {
  const DeltaRuleShape shape{.batch = 2, .seq = 200, .heads = 4, .key_dim = 32, .value_dim = 48};
  const DeltaProblem p = make_delta_problem(shape, true, 21);
  const Result reference = run_forward<double>(p, 0);
  for (int64_t chunk : {0, 32, 64}) {
    SCOPED_TRACE(::testing::Message() << "chunk " << chunk << " (0: recurrence)");
    const Result single = run_forward<float>(p, chunk);
    EXPECT_LT(rel_error(single.out, reference.out), 2e-5);
    EXPECT_LT(rel_error(single.state, reference.state), 2e-5);
  }
}

// Heads that decay fast, as Qwen3.5's initialisation makes them (log decays of -4 to -12 a
// token): the chunk's decays e^(G_t - G_j) and e^G pass through the subnormal range, which
// the chunked form flushes to zero (kernels/float_control.h). Its float output and state still
// match the double recurrence (which keeps subnormals) within the bound of
// FloatFormsMatchDoubleRecurrence: what is flushed is below 1.2e-38 of a sum of terms near 1.
// The gradients within 2e-4: the chunked dg sums pairs of opposite terms (each (t, j) of the
// mask adds to dG_t what it takes from dG_j), which cancel more as the decays spread (5.4e-5
// measured, the same with subnormals kept); a wrong factor gives 1e-2 or more.
TEST(DeltaRuleTest, ChunkedFormWithFastDecaysMatchesTheDoubleRecurrence) {
  const DeltaRuleShape shape{.batch = 2, .seq = 150, .heads = 3, .key_dim = 32, .value_dim = 16};
  const DeltaProblem p = make_delta_problem(shape, true, 23, 4.0, 8.0);
  const Result reference = run_forward<double>(p, 0);
  const std::vector<double> d_out = random_vector(out_size(shape), 24);
  const std::vector<double> d_final = random_vector(state_size(shape), 25);
  const Grads reference_grads = run_backward<double>(p, d_out, &d_final);
  for (int64_t chunk : {0, 32, 64}) {
    SCOPED_TRACE(::testing::Message() << "chunk " << chunk << " (0: recurrence)");
    const Result single = run_forward<float>(p, chunk);
    EXPECT_LT(rel_error(single.out, reference.out), 2e-5);
    EXPECT_LT(rel_error(single.state, reference.state), 2e-5);
    expect_grads_near(run_backward<float>(p, d_out, &d_final, chunk), reference_grads, 2e-4);
  }
}

// Prefill then decode: the chunked form over the first 29 tokens hands its final state to
// the recurrence over the last 16; together they equal one pass over all 45 tokens.
TEST(DeltaRuleTest, StateCarriesFromChunkedPrefillToRecurrentDecode) {
  const DeltaProblem whole = make_delta_problem(kDeltaShape, true, 31);
  const int64_t split = 29;
  auto part = [&](int64_t t0, int64_t t1, std::vector<double> initial) {
    const DeltaRuleShape shape{kDeltaShape.batch, t1 - t0, kDeltaShape.heads, kDeltaShape.key_dim, kDeltaShape.value_dim};
    DeltaProblem p{shape, {}, {}, {}, {}, {}, initial};
    auto take = [&](const std::vector<double>& x, std::vector<double>& into, int64_t width) {
      for (int64_t b = 0; b < kDeltaShape.batch; ++b)
        into.insert(into.end(), x.begin() + (b * kDeltaShape.seq + t0) * kDeltaShape.heads * width,
                    x.begin() + (b * kDeltaShape.seq + t1) * kDeltaShape.heads * width);
    };
    take(whole.q, p.q, kDeltaShape.key_dim);
    take(whole.k, p.k, kDeltaShape.key_dim);
    take(whole.v, p.v, kDeltaShape.value_dim);
    take(whole.g, p.g, 1);
    take(whole.beta, p.beta, 1);
    return p;
  };
  const Result reference = run_forward<double>(whole, 0);
  const Result prefill = run_forward<double>(part(0, split, whole.initial), 16);
  const Result decode = run_forward<double>(part(split, kDeltaShape.seq, prefill.state), 0);
  EXPECT_LT(rel_error(decode.state, reference.state), 1e-11);
  const int64_t row = kDeltaShape.heads * kDeltaShape.value_dim;
  for (int64_t b = 0; b < kDeltaShape.batch; ++b) {
    std::vector<double> joined(prefill.out.begin() + b * split * row, prefill.out.begin() + (b + 1) * split * row);
    joined.insert(joined.end(), decode.out.begin() + b * (kDeltaShape.seq - split) * row,
                  decode.out.begin() + (b + 1) * (kDeltaShape.seq - split) * row);
    const std::vector<double> expected(reference.out.begin() + b * kDeltaShape.seq * row,
                                       reference.out.begin() + (b + 1) * kDeltaShape.seq * row);
    EXPECT_LT(rel_error(joined, expected), 1e-11) << "sequence " << b;
  }
}

// The recurrence with its final state written over its initial state (a decode step's
// carried state): the same bits as into a separate buffer.
TEST(DeltaRuleTest, RecurrentStateUpdatesInPlace) {
  const DeltaProblem p = make_delta_problem(kDeltaShape, true, 37);
  const Typed<float> in(p);
  std::vector<float> out(out_size(p.shape)), separate(state_size(p.shape));
  delta_rule_recurrent_forward(out.data(), separate.data(), in.inputs(), p.shape);
  std::vector<float> state = in.initial, out_in_place(out.size());
  DeltaRuleInputs<float> inputs = in.inputs();
  inputs.initial_state = state.data();
  delta_rule_recurrent_forward(out_in_place.data(), state.data(), inputs, p.shape);
  EXPECT_EQ(state, separate);
  EXPECT_EQ(out_in_place, out);
  EXPECT_NE(state, in.initial);
}

// Runs of one call (a decode step's sequences: 1 row each, one of 3 rows, one from a fresh
// zero state) give each run what delta_rule_recurrent_forward gives it alone, bit for bit, on 1
// and 2 threads (6 rows of 3 heads of 32 x 128: enough work for the threads); a run outside the
// rows or without a state is refused.
TEST(DeltaRuleTest, RunsOfOneCallMatchEachRunAlone) {
  const DeltaRuleShape rows_shape{.batch = 1, .seq = 6, .heads = 3, .key_dim = 32, .value_dim = 128};
  const DeltaProblem p = make_delta_problem(rows_shape, false, 71);
  const Typed<float> in(p);
  const int64_t n = rows_shape.key_dim * rows_shape.value_dim * rows_shape.heads;
  const std::vector<double> initial = random_vector(4 * n, 72, 0.5);
  const int64_t first[] = {0, 1, 4, 5}, count[] = {1, 3, 1, 1};
  const bool fresh[] = {false, false, true, false};
  const int64_t dh = rows_shape.heads, dk = rows_shape.key_dim, dv = rows_shape.value_dim;
  std::vector<float> want_out(out_size(rows_shape)), want_states(4 * n);
  for (int i = 0; i < 4; ++i) {  // each run alone
    const int64_t r = first[i];
    std::vector<float> start(initial.begin() + i * n, initial.begin() + (i + 1) * n);
    const DeltaRuleInputs<float> one{in.q.data() + r * dh * dk, in.k.data() + r * dh * dk, in.v.data() + r * dh * dv,
                                     in.g.data() + r * dh,      in.beta.data() + r * dh,   fresh[i] ? nullptr : start.data()};
    delta_rule_recurrent_forward(want_out.data() + r * dh * dv, want_states.data() + i * n, one,
                                 DeltaRuleShape{1, count[i], dh, dk, dv});
  }
  const int before = omp_get_max_threads();
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    std::vector<float> states(initial.begin(), initial.end()), out(out_size(rows_shape));
    for (int i = 0; i < 4; ++i)
      if (fresh[i]) std::fill_n(states.begin() + i * n, n, 0.0f);
    std::vector<DeltaRuleRun<float>> runs;
    for (int i = 0; i < 4; ++i) runs.push_back({first[i], count[i], states.data() + i * n});
    delta_rule_recurrent_runs<float>(out.data(), runs, in.inputs(), rows_shape);
    EXPECT_EQ(out, want_out) << threads << " threads";
    EXPECT_EQ(states, want_states) << threads << " threads";
  }
  omp_set_num_threads(before);
  std::vector<float> states(4 * n), out(out_size(rows_shape));
  const std::vector<DeltaRuleRun<float>> past_the_rows{{5, 2, states.data()}}, stateless{{0, 1, nullptr}};
  EXPECT_THROW(delta_rule_recurrent_runs<float>(out.data(), past_the_rows, in.inputs(), rows_shape), Error);
  EXPECT_THROW(delta_rule_recurrent_runs<float>(out.data(), stateless, in.inputs(), rows_shape), Error);
}

// The loss L = <w_out, out> + <w_state, final state> (the state term only when the state's
// gradient is given), its gradient from the backward against central differences in fp64.
// The length 70 runs over two checkpoint segments (kCheckpointTokens = 64). Bound 1e-8:
// central differences with h = 1e-5 are exact to about h^2 ~ 1e-10 relative on this smooth
// loss plus rounding eps / h ~ 1e-11 (measured 3e-10); a wrong term in any gradient, even
// 1e-4 off, fails it.
void check_backward_against_finite_differences(bool with_initial, bool with_final_grad) {
  SCOPED_TRACE(::testing::Message() << "initial state " << with_initial << ", final-state gradient "
                                    << with_final_grad);
  const DeltaRuleShape shape{.batch = 2, .seq = 70, .heads = 2, .key_dim = 3, .value_dim = 4};
  DeltaProblem p = make_delta_problem(shape, true, 41);
  if (!with_initial) std::fill(p.initial.begin(), p.initial.end(), 0.0);
  const std::vector<double> w_out = random_vector(out_size(shape), 42);
  const std::vector<double> w_state = random_vector(state_size(shape), 43);
  auto loss = [&] {
    const Result r = run_forward<double>(p, 0);
    return dot(w_out, r.out) + (with_final_grad ? dot(w_state, r.state) : 0.0);
  };
  DeltaProblem as_given = p;
  if (!with_initial) as_given.initial.clear();  // null initial state: the gradient at zero
  const Grads grads = run_backward<double>(as_given, w_out, with_final_grad ? &w_state : nullptr);
  const std::pair<std::vector<double>*, const std::vector<double>*> checks[] = {
      {&p.q, &grads.dq}, {&p.k, &grads.dk},       {&p.v, &grads.dv},
      {&p.g, &grads.dg}, {&p.beta, &grads.dbeta}, {&p.initial, &grads.d_initial}};
  const char* names[] = {"q", "k", "v", "g", "beta", "initial state"};
  for (size_t i = 0; i < std::size(checks); ++i)
    EXPECT_LT(rel_error(*checks[i].second, numeric_grad(*checks[i].first, loss)), 1e-8) << names[i];
}

TEST(DeltaRuleTest, RecurrentBackwardMatchesFiniteDifferences) {
  for (bool with_initial : {false, true})
    for (bool with_final_grad : {false, true}) check_backward_against_finite_differences(with_initial, with_final_grad);
}

// Both float backwards (the recurrence by hand, the chunked form through oneDNN) against the
// double recurrence, over 200 tokens (four checkpoint segments; a short last chunk) at widths
// a layer uses. 2e-5 relative: gradients sum over the whole sequence backwards, so float
// rounding grows more than in the forward (measured 1.2e-6, in dg); a wrong term gives 1e-2
// or more.
TEST(DeltaRuleTest, FloatBackwardMatchesDouble) {
  const DeltaRuleShape shape{.batch = 1, .seq = 200, .heads = 3, .key_dim = 16, .value_dim = 24};
  const DeltaProblem p = make_delta_problem(shape, true, 51);
  const std::vector<double> d_out = random_vector(out_size(shape), 52);
  const std::vector<double> d_final = random_vector(state_size(shape), 53);
  const Grads reference = run_backward<double>(p, d_out, &d_final);
  for (int64_t chunk : {0, 32, 64}) {
    SCOPED_TRACE(::testing::Message() << "chunk " << chunk << " (0: recurrence)");
    expect_grads_near(run_backward<float>(p, d_out, &d_final, chunk), reference, 2e-5);
  }
}

// The chunked backward against the recurrence's (itself checked against finite differences
// above) in double, for the chunk sizes and cases of ChunkedMatchesRecurrenceInDouble. 1e-11:
// both are exact up to double rounding (measured 4e-15); a wrong or missing term gives 1e-3
// or more.
TEST(DeltaRuleTest, ChunkedBackwardMatchesRecurrentBackwardInDouble) {
  for (bool with_initial : {false, true})
    for (bool with_final_grad : {false, true}) {
      const DeltaProblem p = make_delta_problem(kDeltaShape, with_initial, 71);
      const std::vector<double> d_out = random_vector(out_size(kDeltaShape), 72);
      const std::vector<double> d_final = random_vector(state_size(kDeltaShape), 73);
      const std::vector<double>* d_final_given = with_final_grad ? &d_final : nullptr;
      const Grads reference = run_backward<double>(p, d_out, d_final_given);
      for (int64_t chunk : {1, 5, 16, 32, 64}) {
        SCOPED_TRACE(::testing::Message() << "chunk " << chunk << " initial state " << with_initial
                                          << " final-state gradient " << with_final_grad);
        expect_grads_near(run_backward<double>(p, d_out, d_final_given, chunk), reference, 1e-11);
      }
    }
}

// The backward given the forward's chunk states (as training runs it) computes what it
// computes when it runs the chunks forward again for them, bit for bit: float through
// oneDNN, several sequences (threads per sequence), a short last chunk, an initial state.
TEST(DeltaRuleTest, ChunkedBackwardFromKeptChunkStatesIsTheSame) {
  const DeltaRuleShape shape{.batch = 3, .seq = 100, .heads = 2, .key_dim = 16, .value_dim = 8};
  const int64_t chunk = 32;
  const DeltaProblem p = make_delta_problem(shape, true, 81);
  const Typed<float> in(p);
  std::vector<float> out(out_size(shape)), states(delta_rule_chunk_states_size(shape, chunk), -1.0f);
  ASSERT_EQ(states.size(), static_cast<size_t>(3 * 4 * 2 * 16 * 8));  // 4 chunks of 32, 32, 32, 4
  delta_rule_chunked_forward(out.data(), static_cast<float*>(nullptr), in.inputs(), shape, chunk, states.data());
  // the first chunk of each sequence starts from its initial state
  for (int64_t b = 0; b < shape.batch; ++b)
    for (int64_t i = 0; i < 2 * 16 * 8; ++i) ASSERT_EQ(states[b * 4 * 256 + i], in.initial[b * 256 + i]);
  const std::vector<float> d_out = cast<float>(random_vector(out_size(shape), 82));
  auto backward = [&](const float* kept) {
    const size_t keys = out_size(shape) / 8 * 16, scalars = out_size(shape) / 8;
    std::vector<float> dq(keys), dk(keys), dv(out_size(shape)), dg(scalars), dbeta(scalars), d_initial(state_size(shape));
    delta_rule_chunked_backward<float>({dq.data(), dk.data(), dv.data(), dg.data(), dbeta.data(), d_initial.data()},
                                       d_out.data(), nullptr, in.inputs(), shape, chunk, kept);
    return std::vector<std::vector<float>>{dq, dk, dv, dg, dbeta, d_initial};
  };
  EXPECT_EQ(backward(states.data()), backward(nullptr));
}

// The chunked form's tasks (a sequence's heads in groups, here one sequence of four heads in
// four groups) give the same bits on one thread and on two, forward and backward.
TEST(DeltaRuleTest, ChunkedFormGivesTheSameBitsOnOneAndTwoThreads) {
  const DeltaRuleShape shape{.batch = 1, .seq = 70, .heads = 4, .key_dim = 16, .value_dim = 8};
  const DeltaProblem p = make_delta_problem(shape, true, 91);
  const std::vector<double> d_out = random_vector(out_size(shape), 92);
  const int before = omp_get_max_threads();
  std::vector<Result> forward;
  std::vector<Grads> backward;
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    forward.push_back(run_forward<float>(p, 32));
    backward.push_back(run_backward<float>(p, d_out, nullptr, 32));
  }
  omp_set_num_threads(before);
  EXPECT_EQ(forward[0].out, forward[1].out);
  EXPECT_EQ(forward[0].state, forward[1].state);
  for (auto field : {&Grads::dq, &Grads::dk, &Grads::dv, &Grads::dg, &Grads::dbeta, &Grads::d_initial})
    EXPECT_EQ(backward[0].*field, backward[1].*field);
}

TEST(DeltaRuleTest, RejectsBadChunkSizeAndShape) {
  const DeltaProblem p = make_delta_problem(kDeltaShape, false, 61);
  const Typed<double> in(p);
  std::vector<double> out(out_size(kDeltaShape));
  EXPECT_THROW(delta_rule_chunked_forward<double>(out.data(), nullptr, in.inputs(), kDeltaShape, 0), Error);
  DeltaRuleShape bad = kDeltaShape;
  bad.key_dim = 0;
  EXPECT_THROW(delta_rule_recurrent_forward<double>(out.data(), nullptr, in.inputs(), bad), Error);
}

}  // namespace
}  // namespace gatedlm::kernels
