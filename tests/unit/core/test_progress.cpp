// The progress line (core/progress.h): where it ends when the work completes and when it
// stops short (a paused training segment).
#include <gtest/gtest.h>

#include <string>

#include "core/progress.h"

namespace gatedlm {
namespace {

// The last line Progress printed to stderr (not a terminal here: every draw ends its line).
std::string last_line(const std::string& printed) {
  const std::string text = printed.substr(0, printed.find_last_not_of('\n') + 1);
  return text.substr(text.find_last_of('\n') + 1);
}

TEST(ProgressTest, FinishDrawsTheWholeBar) {
  testing::internal::CaptureStderr();
  Progress progress("train", 585);
  progress.finish("step 585");
  const std::string line = last_line(testing::internal::GetCapturedStderr());
  EXPECT_NE(line.find("[########################] 100% 585/585  step 585"), std::string::npos) << line;
  EXPECT_NE(line.find("eta 0m00s"), std::string::npos) << line;
}

TEST(ProgressTest, StopShowsWhereTheWorkStopped) {
  testing::internal::CaptureStderr();
  Progress progress("train", 585);
  progress.stop(36, "paused at step 36");
  progress.stop(900, "past the end");  // more than the total: a full bar, never above 100 %
  const std::string printed = testing::internal::GetCapturedStderr();
  const std::string first = printed.substr(0, printed.find('\n'));
  EXPECT_NE(first.find("[#                       ]   6% 36/585  paused at step 36"), std::string::npos) << first;
  EXPECT_NE(first.find("eta -"), std::string::npos) << first;
  EXPECT_NE(last_line(printed).find("100% 585/585  past the end"), std::string::npos) << printed;
}

// A time budget's total is known only after a few steps: the line counts against it from then.
TEST(ProgressTest, ATotalSetLaterIsTheOneDrawn) {
  testing::internal::CaptureStderr();
  Progress progress("train", 1);
  progress.set_total(400);
  progress.finish("step 400");
  progress.stop(100, "paused");
  const std::string printed = testing::internal::GetCapturedStderr();
  EXPECT_NE(printed.find("100% 400/400  step 400"), std::string::npos) << printed;
  EXPECT_NE(last_line(printed).find(" 25% 100/400  paused"), std::string::npos) << printed;
}

}  // namespace
}  // namespace gatedlm
