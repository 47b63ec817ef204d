// The sampler's filters and draws against naive recomputations, and generation's text
// rules (stop strings, UTF-8, EOS, max tokens).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "infer/generation.h"
#include "infer/sampler.h"
#include "io/tokenizer.h"
#include "test_files.h"

namespace gatedlm::infer {
namespace {

// The textbook pipeline, written out plainly over a small vocabulary.
std::vector<double> naive_distribution(std::vector<double> z, const SamplingParams& p, const std::vector<int32_t>& hist) {
  const size_t V = z.size();
  for (size_t i = 0; i < V; ++i)
    if (std::find(hist.begin(), hist.end(), static_cast<int32_t>(i)) != hist.end())
      z[i] = z[i] > 0 ? z[i] / p.repetition_penalty : z[i] * p.repetition_penalty;
  std::vector<double> out(V, 0.0);
  if (p.temperature == 0) {
    size_t best = 0;
    for (size_t i = 1; i < V; ++i)
      if (z[i] > z[best]) best = i;
    out[best] = 1;
    return out;
  }
  double s = 0;
  for (size_t i = 0; i < V; ++i) s += std::exp(z[i] / p.temperature);
  std::vector<double> q(V);
  for (size_t i = 0; i < V; ++i) q[i] = std::exp(z[i] / p.temperature) / s;
  // rank[i]: how many tokens come before i (higher probability, or equal and lower id)
  std::vector<bool> keep(V, true);
  double cum_before = 0;
  std::vector<size_t> idx(V);
  for (size_t i = 0; i < V; ++i) idx[i] = i;
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return q[a] > q[b] || (q[a] == q[b] && a < b); });
  for (size_t r = 0; r < V; ++r) {
    const size_t i = idx[r];
    if (p.top_k > 0 && static_cast<int64_t>(r) >= p.top_k) keep[i] = false;
    if (p.top_p < 1 && r > 0 && cum_before >= p.top_p) keep[i] = false;
    cum_before += q[i];
  }
  double qmax = 0;
  for (size_t i = 0; i < V; ++i)
    if (keep[i]) qmax = std::max(qmax, q[i]);
  double t = 0;
  for (size_t i = 0; i < V; ++i) {
    if (keep[i] && q[i] >= p.min_p * qmax) out[i] = q[i];
    t += out[i];
  }
  for (double& x : out) x /= t;
  return out;
}

const std::vector<float> kLogits{1.5f, -0.3f, 2.2f, 0.0f, 2.2f, -1.7f, 0.9f, 3.1f, -0.2f, 1.1f};

TEST(Sampler, DistributionsMatchNaivePipeline) {
  const std::vector<int32_t> hist{7, 3, 5};
  std::vector<double> z(kLogits.begin(), kLogits.end());
  for (double temp : {0.0, 0.5, 1.0, 1.7})
    for (int64_t k : {0, 1, 3, 10})
      for (double top_p : {1.0, 0.9, 0.5, 0.05})
        for (double min_p : {0.0, 0.1, 0.5})
          for (double pen : {1.0, 1.3, 0.8}) {
            SamplingParams p{temp, k, top_p, min_p, pen, 1};
            const auto got = Sampler(p).distribution(kLogits, hist);
            const auto want = naive_distribution(z, p, hist);
            for (size_t i = 0; i < z.size(); ++i)
              ASSERT_NEAR(got[i], want[i], 1e-12) << "T " << temp << " k " << k << " p " << top_p << " min_p "
                                                  << min_p << " pen " << pen << " token " << i;
          }
}

TEST(Sampler, FiltersKeepWhatTheyShould) {
  SamplingParams p;
  p.top_k = 2;
  auto d = Sampler(p).distribution(kLogits, {});
  EXPECT_EQ(std::count_if(d.begin(), d.end(), [](double x) { return x > 0; }), 2);
  EXPECT_GT(d[7], 0);
  EXPECT_GT(d[2], 0);  // tie 2.2 at ids 2 and 4: the lower id stays
  EXPECT_EQ(d[4], 0);
  p = {};
  p.temperature = 0;
  d = Sampler(p).distribution(kLogits, {});
  EXPECT_EQ(d[7], 1.0);
  p.repetition_penalty = 2.0;  // 3.1 / 2 = 1.55 < 2.2: greedy moves to the first 2.2
  d = Sampler(p).distribution(kLogits, std::vector<int32_t>{7});
  EXPECT_EQ(d[2], 1.0);
}

TEST(Sampler, DrawsFollowTheDistributionAndTheSeed) {
  SamplingParams p;
  p.temperature = 0.8;
  p.top_p = 0.95;
  p.seed = 42;
  Sampler a(p), b(p);
  const auto want = a.distribution(kLogits, {});
  std::map<int32_t, int> counts;
  const int draws = 40000;
  std::vector<int32_t> seq_a, seq_b;
  for (int i = 0; i < draws; ++i) {
    const int32_t t = a.sample(kLogits, {});
    seq_a.push_back(t);
    seq_b.push_back(b.sample(kLogits, {}));
    ++counts[t];
  }
  EXPECT_EQ(seq_a, seq_b);  // same seed, same tokens
  for (size_t i = 0; i < want.size(); ++i) {
    const double f = counts[static_cast<int32_t>(i)] / static_cast<double>(draws);
    const double sd = std::sqrt(want[i] * (1 - want[i]) / draws);
    EXPECT_NEAR(f, want[i], 5 * sd + 1e-12) << "token " << i;
    if (want[i] == 0) { EXPECT_EQ(counts[static_cast<int32_t>(i)], 0); }
  }
  p.seed = 43;
  Sampler c(p);
  std::vector<int32_t> seq_c;
  for (int i = 0; i < 200; ++i) seq_c.push_back(c.sample(kLogits, {}));
  EXPECT_NE(seq_c, std::vector<int32_t>(seq_a.begin(), seq_a.begin() + 200));
}

TEST(Sampler, RejectsOutOfRangeParameters) {
  using testing::contains;
  using testing::error_of;
  EXPECT_TRUE(contains(error_of([] { Sampler({-1.0, 0, 1.0, 0.0, 1.0, 0}); }), "--temperature"));
  EXPECT_TRUE(contains(error_of([] { Sampler({1.0, -2, 1.0, 0.0, 1.0, 0}); }), "--top-k"));
  EXPECT_TRUE(contains(error_of([] { Sampler({1.0, 0, 0.0, 0.0, 1.0, 0}); }), "--top-p"));
  EXPECT_TRUE(contains(error_of([] { Sampler({1.0, 0, 1.0, 1.5, 1.0, 0}); }), "--min-p"));
  EXPECT_TRUE(contains(error_of([] { Sampler({1.0, 0, 1.0, 0.0, 0.0, 0}); }), "--repetition-penalty"));
}

// Logits that make token `t` certain under greedy sampling.
std::vector<float> one_hot(int64_t vocab, int32_t t) {
  std::vector<float> z(vocab, 0.0f);
  z[t] = 10.0f;
  return z;
}

TEST(Generation, StopStringsUtf8EosAndLength) {
  auto tok = io::Tokenizer::load("byte");
  SamplingParams greedy;
  greedy.temperature = 0;
  const int64_t V = tok->vocab_size();
  {  // "ab|cd": the stop string "|c" is held back while incomplete, then cut.
    Generation g({tok->bos_id()}, greedy, {100, {"|c"}, tok->eos_id()}, tok.get());
    std::string shown;
    for (char ch : std::string("ab|cd")) {
      if (g.finished()) break;
      shown += g.accept(one_hot(V, static_cast<unsigned char>(ch)));
      if (ch == '|') { EXPECT_EQ(shown, "ab"); }  // "|" might start "|c"
    }
    EXPECT_EQ(shown, "ab");
    EXPECT_EQ(g.text(), "ab");
    EXPECT_EQ(to_string(g.finish_reason()), "stop");
  }
  {  // A two-byte character is shown only once complete.
    Generation g({tok->bos_id()}, greedy, {100, {}, tok->eos_id()}, tok.get());
    EXPECT_EQ(g.accept(one_hot(V, 0xC3)), "");
    EXPECT_EQ(g.accept(one_hot(V, 0xA9)), "\xC3\xA9");
    EXPECT_EQ(g.accept(one_hot(V, tok->eos_id())), "");
    EXPECT_EQ(to_string(g.finish_reason()), "eos");
    EXPECT_EQ(g.generated().size(), 2u);  // EOS not included
  }
  {
    Generation g({1, 2}, greedy, {3, {}, -1}, nullptr);
    EXPECT_EQ(g.pending().size(), 2u);
    for (int i = 0; i < 3; ++i) {
      EXPECT_FALSE(g.finished());
      g.accept(one_hot(V, 65));
      EXPECT_EQ(g.pending().size(), 1u);
    }
    EXPECT_EQ(to_string(g.finish_reason()), "length");
  }
}

// A model whose vocabulary is larger than its tokenizer's (padded embedding rows, or a
// random model served with the byte tokenizer): ids the tokenizer cannot decode are never
// sampled, even where they carry the largest logit; without a tokenizer every id can be.
TEST(Generation, NeverSamplesIdsTheTokenizerCannotDecode) {
  auto tok = io::Tokenizer::load("byte");
  const int64_t V = tok->vocab_size() + 100;
  std::vector<float> logits(V, 0.0f);
  logits[V - 1] = 50.0f;  // past the tokenizer
  logits['x'] = 10.0f;    // the best id it can decode
  for (const double temperature : {0.0, 1.0}) {
    SamplingParams p;
    p.temperature = temperature;
    p.seed = 7;
    Generation g({tok->bos_id()}, p, {20, {}, -1}, tok.get());
    while (!g.finished()) g.accept(logits);
    for (int32_t id : g.generated()) EXPECT_LT(id, tok->vocab_size()) << "temperature " << temperature;
    if (temperature == 0.0) { EXPECT_EQ(g.text(), std::string(20, 'x')); }
  }
  SamplingParams greedy;
  greedy.temperature = 0;
  Generation raw({1}, greedy, {1, {}, -1}, nullptr);
  raw.accept(logits);
  EXPECT_EQ(raw.generated().front(), V - 1);
}

}  // namespace
}  // namespace gatedlm::infer
