// train/train_config.h's learning_rate: linear warmup to lr over `warmup` steps, then a half
// cosine from lr down to min_lr, reached at step total_steps (0-based steps; the decay
// spans total_steps - warmup steps). tests/reference/test_trainer_against_torch.py checks
// the same schedule step for step against PyTorch.
#include <gtest/gtest.h>

#include <cmath>

#include "train/train_config.h"

namespace gatedlm::train {
namespace {

TrainConfig schedule(double lr, double min_lr, int64_t warmup) {
  TrainConfig c;
  c.lr = lr;
  c.min_lr = min_lr;
  c.warmup = warmup;
  return c;
}

TEST(LearningRate, WarmupRisesLinearlyAndReachesLrAtItsLastStep) {
  const TrainConfig c = schedule(1e-3, 1e-4, 10);
  EXPECT_DOUBLE_EQ(learning_rate(c, 0, 100), 1e-4);  // lr / warmup at the first step
  EXPECT_DOUBLE_EQ(learning_rate(c, 4, 100), 5e-4);
  for (int64_t step = 1; step < 10; ++step)  // equal increments of lr / warmup
    EXPECT_NEAR(learning_rate(c, step, 100) - learning_rate(c, step - 1, 100), 1e-4, 1e-15) << step;
  EXPECT_DOUBLE_EQ(learning_rate(c, 9, 100), 1e-3);   // warmup's last step: the peak
  EXPECT_DOUBLE_EQ(learning_rate(c, 10, 100), 1e-3);  // the cosine starts at the peak
}

TEST(LearningRate, CosineHalfwayIsTheMeanAndEndsAtMinLr) {
  const TrainConfig c = schedule(1e-3, 1e-4, 10);
  // Steps 10..110 decay: halfway (step 60) is the mean of lr and min_lr.
  EXPECT_NEAR(learning_rate(c, 60, 110), 0.5 * (1e-3 + 1e-4), 1e-15);
  EXPECT_NEAR(learning_rate(c, 35, 110), 1e-4 + 0.5 * 9e-4 * (1.0 + std::cos(M_PI / 4)), 1e-15);
  EXPECT_DOUBLE_EQ(learning_rate(c, 110, 110), 1e-4);  // min_lr at step total_steps
  EXPECT_GT(learning_rate(c, 109, 110), 1e-4);         // the last trained step is just above it
  EXPECT_DOUBLE_EQ(learning_rate(c, 500, 110), 1e-4);  // and it stays there past the plan
}

TEST(LearningRate, NeverRisesAfterWarmup) {
  const TrainConfig c = schedule(3e-3, 3e-4, 3);
  for (int64_t step = 4; step <= 40; ++step)
    EXPECT_LE(learning_rate(c, step, 40), learning_rate(c, step - 1, 40)) << step;
}

TEST(LearningRate, NoWarmupStartsAtTheFullRate) {
  const TrainConfig c = schedule(2e-3, 0.0, 0);
  EXPECT_DOUBLE_EQ(learning_rate(c, 0, 50), 2e-3);
  EXPECT_NEAR(learning_rate(c, 25, 50), 1e-3, 1e-15);
  EXPECT_DOUBLE_EQ(learning_rate(c, 50, 50), 0.0);
}

TEST(LearningRate, APlanNoLongerThanWarmupDecaysOverOneStep) {
  // total_steps <= warmup: the decay spans one step (never a division by zero).
  const TrainConfig c = schedule(1e-3, 1e-4, 10);
  EXPECT_DOUBLE_EQ(learning_rate(c, 10, 5), 1e-3);
  EXPECT_DOUBLE_EQ(learning_rate(c, 11, 5), 1e-4);
  EXPECT_TRUE(std::isfinite(learning_rate(c, 10, 10)));
}

}  // namespace
}  // namespace gatedlm::train
