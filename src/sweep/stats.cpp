#include "sweep/stats.h"

#include <cmath>
#include <vector>

#include "core/error.h"

namespace gatedlm::sweep {

MeanStd mean_std(std::span<const double> values) {
  MeanStd r;
  double sum = 0;
  for (double v : values)
    if (std::isfinite(v)) sum += v, ++r.n;
  r.mean = r.n > 0 ? sum / static_cast<double>(r.n) : NAN;
  if (r.n < 2) {
    r.std = NAN;
    return r;
  }
  double ss = 0;
  for (double v : values)
    if (std::isfinite(v)) ss += (v - r.mean) * (v - r.mean);
  r.std = std::sqrt(ss / static_cast<double>(r.n - 1));
  return r;
}

namespace {

// The continued fraction of the regularized incomplete beta function I_x(a, b), evaluated
// by the modified Lentz method; converges quickly for x < (a + 1) / (a + b + 2).
double beta_continued_fraction(double a, double b, double x) {
  constexpr double tiny = 1e-300;
  double c = 1.0, d = 1.0 - (a + b) * x / (a + 1.0);
  if (std::fabs(d) < tiny) d = tiny;
  d = 1.0 / d;
  double h = d;
  for (int m = 1; m <= 500; ++m) {
    const double m2 = 2.0 * m;
    // Even step: d_{2m} = m (b - m) x / ((a + 2m - 1)(a + 2m)).
    double num = m * (b - m) * x / ((a + m2 - 1.0) * (a + m2));
    d = 1.0 + num * d;
    c = 1.0 + num / c;
    if (std::fabs(d) < tiny) d = tiny;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1.0 / d;
    h *= d * c;
    // Odd step: d_{2m+1} = -(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1)).
    num = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1.0));
    d = 1.0 + num * d;
    c = 1.0 + num / c;
    if (std::fabs(d) < tiny) d = tiny;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1.0 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1.0) < 1e-15) break;
  }
  return h;
}

double incomplete_beta(double a, double b, double x) {
  if (x <= 0) return 0.0;
  if (x >= 1) return 1.0;
  const double log_front = std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x);
  if (x < (a + 1.0) / (a + b + 2.0)) return std::exp(log_front) * beta_continued_fraction(a, b, x) / a;
  return 1.0 - std::exp(log_front) * beta_continued_fraction(b, a, 1.0 - x) / b;  // I_x(a,b) = 1 - I_{1-x}(b,a)
}

}  // namespace

double student_t_cdf(double t, double df) {
  if (!(df > 0)) fail("student_t_cdf: degrees of freedom must be positive, got ", df);
  if (std::isnan(t)) return NAN;
  // P(T <= t) = 1 - I_{df/(df+t^2)}(df/2, 1/2) / 2 for t >= 0, symmetric below.
  const double tail = 0.5 * incomplete_beta(0.5 * df, 0.5, df / (df + t * t));
  return t >= 0 ? 1.0 - tail : tail;
}

double student_t_quantile(double p, double df) {
  if (!(p > 0 && p < 1)) fail("student_t_quantile: p must be in (0, 1), got ", p);
  if (!(df > 0)) fail("student_t_quantile: degrees of freedom must be positive, got ", df);
  if (p < 0.5) return -student_t_quantile(1.0 - p, df);
  // Bisection on the monotone CDF; the bracket doubles until it holds the quantile.
  double lo = 0.0, hi = 1.0;
  while (student_t_cdf(hi, df) < p) hi *= 2.0;
  for (int i = 0; i < 200 && hi - lo > 1e-13 * std::max(1.0, hi); ++i) {
    const double mid = 0.5 * (lo + hi);
    (student_t_cdf(mid, df) < p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

PairedDifference paired_difference(std::span<const double> x, std::span<const double> baseline, double confidence) {
  if (x.size() != baseline.size())
    fail("paired_difference: ", x.size(), " values against ", baseline.size(), " baseline values");
  std::vector<double> d;
  for (size_t i = 0; i < x.size(); ++i)
    if (std::isfinite(x[i]) && std::isfinite(baseline[i])) d.push_back(x[i] - baseline[i]);
  const MeanStd m = mean_std(d);
  PairedDifference r;
  r.n = m.n;
  r.mean = m.mean;
  r.std = m.std;
  if (r.n < 2) {
    r.t = r.ci_low = r.ci_high = NAN;
    return r;
  }
  r.t = student_t_quantile(0.5 + 0.5 * confidence, static_cast<double>(r.n - 1));
  const double half = r.t * r.std / std::sqrt(static_cast<double>(r.n));
  r.ci_low = r.mean - half;
  r.ci_high = r.mean + half;
  return r;
}

}  // namespace gatedlm::sweep
