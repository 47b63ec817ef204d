#include "infer/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace gatedlm::infer {

void validate(const SamplingParams& p) {
  if (!(p.temperature >= 0) || !std::isfinite(p.temperature)) fail("--temperature must be >= 0, got ", p.temperature);
  if (p.top_k < 0) fail("--top-k must be >= 0 (0 = off), got ", p.top_k);
  if (!(p.top_p > 0 && p.top_p <= 1)) fail("--top-p must be in (0, 1], got ", p.top_p);
  if (!(p.min_p >= 0 && p.min_p <= 1)) fail("--min-p must be in [0, 1], got ", p.min_p);
  if (!(p.repetition_penalty > 0) || !std::isfinite(p.repetition_penalty))
    fail("--repetition-penalty must be > 0, got ", p.repetition_penalty);
}

Sampler::Sampler(const SamplingParams& p) : p_(p), rng_(Rng::derive(p.seed, "sampler")) { validate(p); }

std::vector<double> Sampler::distribution(std::span<const float> logits, std::span<const int32_t> history) const {
  const int64_t V = static_cast<int64_t>(logits.size());
  if (V < 1) fail("sampler: empty logits");
  std::vector<double> z(logits.begin(), logits.end());
  if (p_.repetition_penalty != 1.0) {
    std::vector<bool> seen(V, false);
    for (int32_t t : history)
      if (t >= 0 && t < V) seen[t] = true;
    for (int64_t i = 0; i < V; ++i)
      if (seen[i]) z[i] = z[i] > 0 ? z[i] / p_.repetition_penalty : z[i] * p_.repetition_penalty;
  }
  std::vector<double> p(V, 0.0);
  if (p_.temperature == 0.0) {
    p[std::max_element(z.begin(), z.end()) - z.begin()] = 1.0;  // first maximum: the lowest id
    return p;
  }
  const double zmax = *std::max_element(z.begin(), z.end());
  double sum = 0;
  for (int64_t i = 0; i < V; ++i) sum += p[i] = std::exp((z[i] - zmax) / p_.temperature);
  for (double& x : p) x /= sum;
  if (p_.top_k > 0 || p_.top_p < 1.0) {
    // Tokens by descending probability, ties by id: the order top-k and top-p cut. Only
    // the first k need sorting when top-k is on.
    std::vector<int32_t> order(V);
    std::iota(order.begin(), order.end(), 0);
    auto before = [&](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); };
    int64_t keep = p_.top_k > 0 ? std::min<int64_t>(V, p_.top_k) : V;
    std::partial_sort(order.begin(), order.begin() + keep, order.end(), before);
    if (p_.top_p < 1.0) {
      double mass = 0;
      int64_t i = 0;
      while (i < keep) {
        mass += p[order[i++]];
        if (mass >= p_.top_p) break;
      }
      keep = i;
    }
    for (int64_t i = keep; i < V; ++i) p[order[i]] = 0.0;
  }
  if (p_.min_p > 0) {
    const double floor = p_.min_p * *std::max_element(p.begin(), p.end());
    for (double& x : p)
      if (x < floor) x = 0.0;
  }
  sum = 0;
  for (double x : p) sum += x;
  for (double& x : p) x /= sum;
  return p;
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  const std::vector<double> p = distribution(logits, history);
  const double u = rng_.uniform();  // drawn even when greedy, so the stream never depends on settings
  double acc = 0;
  int32_t last = 0;
  for (int64_t i = 0; i < static_cast<int64_t>(p.size()); ++i) {
    if (p[i] <= 0) continue;
    last = static_cast<int32_t>(i);
    acc += p[i];
    if (u < acc) return last;
  }
  return last;  // rounding left u past the total: the last kept token
}

}  // namespace gatedlm::infer
