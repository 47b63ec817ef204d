// Analysis windows: deterministic, BOS-first, contiguous slices of the stream.
#include <gtest/gtest.h>

#include <numeric>

#include "analysis/analyze.h"
#include "analysis/sequences.h"
#include "core/error.h"

namespace gatedlm::analysis {
namespace {

TEST(AnalysisSequencesTest, DeterministicBosFirstContiguousWindows) {
  std::vector<int32_t> stream(1000);
  std::iota(stream.begin(), stream.end(), 0);
  const SequenceSet a = sample_windows(stream, 5000, 8, 33, 7);
  const SequenceSet b = sample_windows(stream, 5000, 8, 33, 7);
  const SequenceSet c = sample_windows(stream, 5000, 8, 33, 8);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.offsets, b.offsets);
  EXPECT_NE(a.offsets, c.offsets);
  ASSERT_EQ(a.count, 8);
  ASSERT_EQ(a.length, 33);
  for (int64_t i = 0; i < a.count; ++i) {
    const int32_t* r = a.row(i);
    EXPECT_EQ(r[0], 5000);
    EXPECT_GE(a.offsets[i], 0);
    EXPECT_LE(a.offsets[i], 1000 - 32);
    for (int64_t t = 1; t < 33; ++t) EXPECT_EQ(r[t], stream[a.offsets[i] + t - 1]);
  }
  // Round trip through rows (as the analysis JSON stores them).
  const SequenceSet d = sequences_from_rows(a.rows());
  EXPECT_EQ(d.tokens, a.tokens);
}

TEST(AnalysisSequencesTest, ExactFitAndErrors) {
  std::vector<int32_t> stream = {1, 2, 3};
  const SequenceSet s = sample_windows(stream, 9, 2, 4, 0);  // only offset 0 fits
  EXPECT_EQ(s.tokens, (std::vector<int32_t>{9, 1, 2, 3, 9, 1, 2, 3}));
  EXPECT_THROW(sample_windows(stream, 9, 1, 5, 0), Error);
  EXPECT_THROW(sample_windows(stream, 9, 1, 1, 0), Error);
  EXPECT_THROW(sample_windows(stream, 9, 0, 2, 0), Error);
  EXPECT_THROW(sample_windows(stream, -1, 1, 2, 0), Error);
  EXPECT_THROW(sequences_from_rows({{1, 2}, {1, 2, 3}}), Error);
}

TEST(AnalysisSequencesTest, LayerList) {
  EXPECT_EQ(checked_layer_list({0, 3}, 4), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(checked_layer_list({}, 4), (std::vector<int64_t>{}));
  EXPECT_EQ(checked_layer_list({2, 2, 1}, 4), (std::vector<int64_t>{2, 1}));
  EXPECT_THROW(checked_layer_list({4}, 4), Error);
  EXPECT_THROW(checked_layer_list({-1}, 4), Error);
}

}  // namespace
}  // namespace gatedlm::analysis
