// The sweep's statistics against closed forms and hand computations: Student's t CDF
// (Cauchy at 1 degree of freedom, t / (2 sqrt(2 + t^2)) at 2), its 97.5 % quantiles against
// the printed tables, mean and sample standard deviation, and a paired 95 % interval; the
// learned sinks' column of the tables (sink_logit_mass), empty for a model without sinks.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "sweep/stats.h"
#include "sweep/tables.h"

namespace gatedlm::sweep {
namespace {

TEST(SweepStats, StudentTCdfMatchesClosedForms) {
  for (double t : {-30.0, -3.0, -0.7, 0.0, 0.4, 1.5, 6.0, 100.0}) {
    EXPECT_NEAR(student_t_cdf(t, 1), 0.5 + std::atan(t) / M_PI, 1e-12) << t;
    EXPECT_NEAR(student_t_cdf(t, 2), 0.5 + t / (2.0 * std::sqrt(2.0 + t * t)), 1e-12) << t;
  }
  // Large df approaches the normal distribution: Phi(1.959963985) = 0.975.
  EXPECT_NEAR(student_t_cdf(1.959963985, 1e7), 0.975, 1e-6);
}

TEST(SweepStats, QuantilesMatchTheTables) {
  // t_{0.975, df} as printed in every statistics table.
  const std::vector<std::pair<double, double>> table{{1, 12.706204736}, {2, 4.302652730}, {3, 3.182446305},
                                                     {4, 2.776445105},  {9, 2.262157163}, {29, 2.045229642}};
  for (auto [df, t] : table) EXPECT_NEAR(student_t_quantile(0.975, df), t, 1e-8) << df;
  EXPECT_NEAR(student_t_quantile(0.025, 4), -2.776445105, 1e-8);
  EXPECT_NEAR(student_t_quantile(0.5, 3), 0.0, 1e-12);
  for (double p : {0.6, 0.9, 0.995}) EXPECT_NEAR(student_t_cdf(student_t_quantile(p, 5), 5), p, 1e-12);
}

TEST(SweepStats, MeanAndSampleStandardDeviation) {
  const std::vector<double> v{1, 2, 3, 4, NAN};  // NaN: a missing run, left out
  const MeanStd s = mean_std(v);
  EXPECT_EQ(s.n, 4);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_NEAR(s.std, 1.2909944487358056, 1e-14);  // sqrt(5/3)
  const MeanStd one = mean_std(std::vector<double>{7.0});
  EXPECT_EQ(one.n, 1);
  EXPECT_DOUBLE_EQ(one.mean, 7.0);
  EXPECT_TRUE(std::isnan(one.std));
  EXPECT_TRUE(std::isnan(mean_std(std::vector<double>{}).mean));
}

TEST(SweepStats, PairedDifferenceByHand) {
  // d = x - b = (0.10, 0.20, -0.05): mean 0.083333, sd 0.125831, t(0.975, 2) = 4.302653,
  // half width 4.302653 * 0.125831 / sqrt(3) = 0.312581.
  const std::vector<double> x{1.10, 1.25, 0.95, 2.0}, b{1.00, 1.05, 1.00, NAN};  // the 4th pair is incomplete
  const PairedDifference d = paired_difference(x, b);
  EXPECT_EQ(d.n, 3);
  EXPECT_NEAR(d.mean, 0.08333333333333336, 1e-12);
  EXPECT_NEAR(d.std, 0.12583057392117916, 1e-12);
  EXPECT_NEAR(d.t, 4.302652729749464, 1e-9);
  EXPECT_NEAR(d.ci_low, -0.22924714063545554, 1e-9);
  EXPECT_NEAR(d.ci_high, 0.3959138073021223, 1e-9);
  // Pairing matters: the same values unpaired would not give this interval; shuffling the
  // baseline's seeds changes it.
  const PairedDifference shuffled = paired_difference(x, std::vector<double>{1.05, 1.00, 1.00, NAN});
  EXPECT_NE(shuffled.std, d.std);
  // One pair: a difference but no interval.
  const PairedDifference single = paired_difference(std::vector<double>{2.0}, std::vector<double>{1.5});
  EXPECT_EQ(single.n, 1);
  EXPECT_DOUBLE_EQ(single.mean, 0.5);
  EXPECT_TRUE(std::isnan(single.ci_low));
  EXPECT_THROW(paired_difference(std::vector<double>{1.0}, std::vector<double>{1.0, 2.0}), std::exception);
}

TEST(SweepStats, TheSinkLogitColumnSummarisesTheSinksModelsOnly) {
  auto run = [](double mass) {
    nlohmann::json r{{"seed", 1}, {"val_loss", 2.0}, {"diverged", false}};
    r["sink_logit_mass"] = std::isnan(mass) ? nlohmann::json(nullptr) : nlohmann::json(mass);
    return r;
  };
  nlohmann::json sw{{"seeds", {1, 2}},
                    {"train_config", {{"steps", 10}, {"batch_size", 2}, {"seq_len", 8}, {"lr", 0.01}}},
                    {"heldout", nullptr},
                    {"variants",
                     {{{"name", "softmax"}, {"label", "softmax"}, {"runs", {run(NAN), run(NAN)}}},
                      {{"name", "sinks"}, {"label", "sinks"}, {"compare_to", "softmax"}, {"runs", {run(0.25), run(0.35)}}}}}};
  add_statistics(sw);
  const nlohmann::json& sinks = sw["variants"][1]["stats"]["sink_logit_mass"];
  EXPECT_NEAR(sinks["mean"].get<double>(), 0.30, 1e-12);
  EXPECT_NEAR(sinks["std"].get<double>(), std::sqrt(0.005), 1e-12);
  EXPECT_TRUE(sw["variants"][0]["stats"]["sink_logit_mass"]["mean"].is_null());
  const std::string md = sweep_markdown(sw);
  EXPECT_NE(md.find("| Sink logit |"), std::string::npos);
  EXPECT_NE(md.find("| 0.300 ± 0.071 |"), std::string::npos) << md;
}

}  // namespace
}  // namespace gatedlm::sweep
