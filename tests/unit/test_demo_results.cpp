// demo/results.h: the tok/s of a run trained in segments comes from every step record of
// its metrics.jsonl (the demo's budget plan splits training; the last segment may train
// no step at all, and summary.json's tokens_per_s then says 0).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "demo/results.h"

namespace gatedlm::demo {
namespace {

namespace fs = std::filesystem;

TEST(DemoResults, RunThroughputIsTheHarmonicMeanOfItsStepsAcrossSegments) {
  const fs::path dir = fs::path(::testing::TempDir()) / "demo_results_tps";
  fs::create_directories(dir);
  EXPECT_TRUE(run_tokens_per_s(dir.string()).is_null());  // no metrics yet
  {
    std::ofstream m(dir / "metrics.jsonl");
    m << R"({"step":1,"loss":5.0,"tokens_per_s":100.0})" << "\n"
      << R"({"step":2,"loss":4.9,"tokens_per_s":100.0})" << "\n"
      << R"({"step":2,"val_loss":4.8,"val_ppl":121.0})" << "\n"  // an evaluation record
      << R"({"step":3,"loss":4.7,"tokens_per_s":50.0})" << "\n"     // a segment that is redone ...
      << R"({"step":3,"loss":4.7,"tokens_per_s":200.0})" << "\n"    // ... after a resume: the later one
      << "not json\n"
      << R"({"step":4,"loss":4.6,"tokens_per_s":200.0})" << "\n";
  }
  const nlohmann::json tps = run_tokens_per_s(dir.string());
  ASSERT_TRUE(tps.is_number());
  // 4 steps of equal tokens taking 1/100 + 1/100 + 1/200 + 1/200 seconds per token.
  EXPECT_NEAR(tps.get<double>(), 4.0 / (0.01 + 0.01 + 0.005 + 0.005), 1e-9);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gatedlm::demo
