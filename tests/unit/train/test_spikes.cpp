// train/spikes.h: a step is a loss spike when, after warmup and with enough history, its
// loss exceeds the median of the previous `window` losses by more than `margin`.
#include <gtest/gtest.h>

#include <deque>
#include <vector>

#include "train/spikes.h"

namespace gatedlm::train {
namespace {

// Feeds `losses` as steps first_step, first_step + 1, ...; returns the steps flagged.
std::vector<int64_t> feed(SpikeDetector& d, const std::vector<double>& losses, int64_t first_step) {
  std::vector<int64_t> flagged;
  for (size_t i = 0; i < losses.size(); ++i)
    if (d.observe(first_step + static_cast<int64_t>(i), losses[i])) flagged.push_back(first_step + i);
  return flagged;
}

TEST(Median, OddEvenAndEmpty) {
  EXPECT_EQ(median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_EQ(median({4.0, 1.0, 3.0, 2.0}), 2.5);  // the mean of the middle two
  EXPECT_EQ(median({5.0}), 5.0);
  EXPECT_EQ(median({}), 0.0);
}

TEST(SpikeDetector, FlagsALossAboveTheMarginAndNotOneBelowIt) {
  SpikeDetector d(/*window=*/20, /*margin=*/0.2, /*warmup=*/0);
  EXPECT_TRUE(feed(d, {2.0, 2.0, 2.0, 2.0, 2.0}, 1).empty());
  // The median is 2.0: the threshold is 2.4.
  EXPECT_FALSE(d.observe(6, 2.39));
  EXPECT_TRUE(d.observe(7, 2.41));
  EXPECT_FALSE(d.observe(8, 2.0));
  EXPECT_EQ(d.spike_steps(), (std::vector<int64_t>{7}));
}

TEST(SpikeDetector, TheMedianIgnoresOneOutlierInTheHistory) {
  // A mean (17.5) would be pulled up by the 100.0 and miss the spike at 1.3; the median is
  // 1.0. (The 100.0 itself comes with too little history to be judged.)
  SpikeDetector d(20, 0.2, 0);
  EXPECT_EQ(feed(d, {1.0, 1.0, 100.0, 1.0, 1.0, 1.0, 1.3}, 1), (std::vector<int64_t>{7}));
}

TEST(SpikeDetector, NeedsFiveStepsOfHistoryBeforeJudging) {
  // Window 20: max(5, 20 / 10) = 5 losses of history first, however large the jump.
  SpikeDetector d(20, 0.2, 0);
  EXPECT_TRUE(feed(d, {1.0, 1.0, 1.0, 1.0, 50.0}, 1).empty());
  // With a window of 100, a tenth of it (10 losses).
  SpikeDetector wide(100, 0.2, 0);
  EXPECT_TRUE(feed(wide, std::vector<double>(9, 1.0), 1).empty());
  EXPECT_FALSE(wide.observe(10, 50.0));  // 9 losses of history: not yet
  EXPECT_TRUE(wide.observe(11, 60.0));   // 10 of them (median 1.0)
}

TEST(SpikeDetector, NothingIsFlaggedDuringWarmup) {
  SpikeDetector d(20, 0.2, /*warmup=*/10);
  std::vector<double> losses(12, 1.0);
  losses[8] = 5.0;   // step 9: before warmup ends
  losses[11] = 5.0;  // step 12: after it
  EXPECT_EQ(feed(d, losses, 1), (std::vector<int64_t>{12}));
}

TEST(SpikeDetector, KeepsOnlyTheLastWindowOfLosses) {
  // After ten losses of 10.0 and ten of 1.0, a window of 10 holds only the 1.0s: 1.3 is a
  // spike. (With the older losses kept, the median would be 5.5 and 1.3 would pass.)
  SpikeDetector d(10, 0.2, 0);
  std::vector<double> losses(10, 10.0);
  losses.insert(losses.end(), 10, 1.0);
  feed(d, losses, 1);
  EXPECT_EQ(d.history().size(), 10u);
  EXPECT_EQ(d.history().front(), 1.0);
  EXPECT_TRUE(d.observe(21, 1.3));
  EXPECT_EQ(d.history().back(), 1.3);  // a spike's loss enters the history too
}

TEST(SpikeDetector, RestoredStateDecidesAsTheOriginal) {
  SpikeDetector original(10, 0.2, 0);
  const std::vector<double> before{1.0, 1.1, 0.9, 1.0, 3.0, 1.0, 1.05, 0.95};
  feed(original, before, 1);
  SpikeDetector restored(10, 0.2, 0);
  restored.restore(original.history(), original.spike_steps());
  const std::vector<double> after{1.25, 1.19, 1.0, 1.4, 0.8};
  EXPECT_EQ(feed(restored, after, 9), feed(original, after, 9));
  EXPECT_EQ(restored.spike_steps(), original.spike_steps());
  EXPECT_EQ(restored.history(), original.history());
  EXPECT_FALSE(restored.spike_steps().empty());
}

}  // namespace
}  // namespace gatedlm::train
