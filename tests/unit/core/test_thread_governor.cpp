// The OpenMP thread count under shared cores (core/thread_governor.h): the decision fed
// with samples, the /proc parsing, and gatedlm train itself beside busy threads.
#include "core/thread_governor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cli_runner.h"
#include "test_files.h"
#include "tiny_training_data.h"

namespace gatedlm {
namespace {

namespace fs = std::filesystem;

TEST(ThreadGovernorTest, KeepsEveryThreadOnAQuietMachine) {
  ThreadGovernor g(4, 4);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(g.observe(0), 4);
}

TEST(ThreadGovernorTest, ShrinksToTheFreeCoresAfterTwoBusySamples) {
  ThreadGovernor g(4, 4);
  EXPECT_EQ(g.observe(1), 4);  // one sample may be a passing task
  EXPECT_EQ(g.observe(1), 3);
  // Many more runnable threads than cores: one thread, never none.
  EXPECT_EQ(g.observe(9), 3);
  EXPECT_EQ(g.observe(9), 1);
}

TEST(ThreadGovernorTest, TwoBusySamplesAgreeOnTheLargerCount) {
  ThreadGovernor g(8, 8);
  g.observe(5);                // wants 3
  EXPECT_EQ(g.observe(2), 6);  // wants 6: the busier sample does not decide alone
}

TEST(ThreadGovernorTest, AQuietSampleBetweenBusyOnesStartsCountingAgain) {
  ThreadGovernor g(2, 2);
  EXPECT_EQ(g.observe(3), 2);
  EXPECT_EQ(g.observe(0), 2);
  EXPECT_EQ(g.observe(3), 2);
  EXPECT_EQ(g.observe(3), 1);
}

TEST(ThreadGovernorTest, GrowsBackOnlyAfterFiveQuietSamples) {
  ThreadGovernor g(2, 2);
  g.observe(4);
  ASSERT_EQ(g.observe(4), 1);
  for (int i = 1; i < ThreadGovernor::kSamplesToGrow; ++i) EXPECT_EQ(g.observe(0), 1) << i;
  EXPECT_EQ(g.observe(0), 2);
  // Its own single thread is not another program: the other program's one thread keeps it at 1.
  g.observe(1);
  EXPECT_EQ(g.observe(1), 1);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(g.observe(1), 1);
}

TEST(ThreadGovernorTest, NeverAboveTheMaximumEvenOnMoreCores) {
  ThreadGovernor g(2, 16);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(g.observe(3), 2);
}

TEST(ThreadGovernorTest, ReadsTheRunnableTasksOfProcLoadavg) {
  EXPECT_EQ(parse_runnable_tasks("0.89 2.42 2.70 1/79 7722\n"), 1);
  EXPECT_EQ(parse_runnable_tasks("12.00 11.50 10.25 17/1234 99"), 17);
  EXPECT_EQ(parse_runnable_tasks(""), -1);
  EXPECT_EQ(parse_runnable_tasks("0.89 2.42 2.70"), -1);
  EXPECT_EQ(parse_runnable_tasks("0.89 2.42 2.70 x/79 1"), -1);
  EXPECT_EQ(parse_runnable_tasks("0.89 2.42 2.70 3 79"), -1);
}

TEST(ThreadGovernorTest, ReadsATaskStateAfterTheLastParenthesis) {
  EXPECT_EQ(parse_task_state("1234 (gatedlm) R 1 2 3"), 'R');
  EXPECT_EQ(parse_task_state("1234 (a) (S) b) S 1 2 3"), 'S');
  EXPECT_EQ(parse_task_state("1234 (gatedlm)"), 0);
  EXPECT_EQ(parse_task_state("garbage"), 0);
}

}  // namespace
}  // namespace gatedlm
