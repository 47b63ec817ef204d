// dist/ in one process: the stand-in communicator's collectives are the identity, and
// GradientSum gives the mean of the micro-batch gradients summed in float64 (rounded once:
// within half a float ulp of a long-double reference), passing a lone micro-batch's gradient through untouched.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/rng.h"
#include "dist/collectives.h"
#include "dist/gradient_sum.h"

namespace gatedlm::dist {
namespace {

TEST(SingleProcess, CollectivesLeaveTheDataAsItIs) {
  auto comm = single_process();
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->size(), 1);
  std::vector<double> d{1.5, -2.0, 3.25};
  comm->allreduce_sum(std::span<double>(d));
  EXPECT_EQ(d, (std::vector<double>{1.5, -2.0, 3.25}));
  const std::vector<int> mine{7, 8};
  EXPECT_EQ(allgather_values(*comm, std::span<const int>(mine)), mine);
  EXPECT_EQ(broadcast_string(*comm, "run"), "run");
  EXPECT_EQ(from_root(*comm, 2.5), 2.5);
  EXPECT_TRUE(any_rank(*comm, true));
  EXPECT_FALSE(any_rank(*comm, false));
}

TEST(GradientSum, MeanOfMicroBatchesInFloat64) {
  auto comm = single_process();
  const size_t n = 1000;
  const int micro = 3;
  Rng rng(3);
  std::vector<std::vector<float>> grads(micro, std::vector<float>(n));
  for (auto& g : grads)
    for (float& x : g) x = static_cast<float>(rng.uniform() * 2.0 - 1.0) * 1e-3f;
  GradientSum sum(*comm, n, micro);
  EXPECT_EQ(sum.reduced_bytes(), 0u);  // nothing crosses ranks in one process
  std::vector<float> out(n);
  for (int step = 0; step < 2; ++step) {  // the sum starts afresh each step
    for (const auto& g : grads) sum.add(g);
    sum.finish(out, micro);
    for (size_t i = 0; i < n; ++i) {
      long double ref = 0;
      for (const auto& g : grads) ref += g[i];
      // Rounded once from the exact mean (a float sum, rounded at every add, is not).
      const long double exact = ref / micro;
      const float ulp = std::nextafter(std::abs(out[i]), INFINITY) - std::abs(out[i]);
      EXPECT_LE(std::abs(static_cast<long double>(out[i]) - exact), 0.501L * ulp) << i;
    }
  }
}

TEST(GradientSum, OneMicroBatchInOneProcessPassesThrough) {
  auto comm = single_process();
  std::vector<float> g{0.1f, -0.2f, 0.3f};
  const std::vector<float> before = g;
  GradientSum sum(*comm, g.size(), 1);
  sum.add(g);
  sum.finish(g, 1);
  EXPECT_EQ(g, before);
  EXPECT_EQ(sum.last_reduce_seconds(), 0.0);
}

}  // namespace
}  // namespace gatedlm::dist
