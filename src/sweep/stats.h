#pragma once
// The statistics of a sweep's table: mean and sample standard deviation over seeds, and the
// difference of a variant to its baseline paired by seed, with a Student-t 95 % confidence
// interval: d_i = x_i - b_i over the seeds where both are finite,
//   mean(d) +- t_{0.975, n-1} * sd(d) / sqrt(n).
#include <cstdint>
#include <span>

namespace gatedlm::sweep {

struct MeanStd {
  int64_t n = 0;     // finite values
  double mean = 0;   // NaN when n = 0
  double std = 0;    // sample standard deviation (n - 1); NaN when n < 2
};

// Non-finite values (NaN: a missing measurement, a diverged run) are left out.
MeanStd mean_std(std::span<const double> values);

struct PairedDifference {
  int64_t n = 0;       // pairs with both values finite
  double mean = 0;     // mean of x_i - b_i (NaN when n = 0)
  double std = 0;      // sample standard deviation of the differences (NaN when n < 2)
  double t = 0;        // t_{0.975, n-1} (NaN when n < 2)
  double ci_low = 0, ci_high = 0;  // NaN when n < 2
};

// x and baseline are indexed by seed (the same order); sizes must match.
PairedDifference paired_difference(std::span<const double> x, std::span<const double> baseline,
                                   double confidence = 0.95);

// Student's t distribution with df > 0 degrees of freedom.
double student_t_cdf(double t, double df);
// The p-quantile (0 < p < 1): student_t_cdf(student_t_quantile(p, df), df) = p.
double student_t_quantile(double p, double df);

}  // namespace gatedlm::sweep
