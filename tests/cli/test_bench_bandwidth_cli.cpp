// gatedlm bench bandwidth, and bench generate's decode reads as a share of it: the weight
// bytes a batch-1 step reads, written out by hand for a tiny fp32 and a Q8_0 model.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli_runner.h"
#include "test_files.h"

namespace gatedlm::testing {
namespace {

// The last line of the output that is a JSON object.
nlohmann::json bandwidth_json(const std::string& output) {
  std::istringstream lines(output);
  std::string line, last;
  while (std::getline(lines, line))
    if (!line.empty() && line.front() == '{') last = line;
  return nlohmann::json::parse(last);
}

TEST(BenchBandwidthCliTest, ReportsTheReadBound) {
  const CliResult r = run_gatedlm({"bench", "bandwidth", "--size-mib", "16", "--reps", "3", "--threads", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json j = bandwidth_json(r.output);
  EXPECT_EQ(j["bytes"], 16 << 20);
  EXPECT_EQ(j["threads"], 1);
  EXPECT_GT(j["median_gbs"].get<double>(), 0.05);
  EXPECT_GE(j["best_gbs"].get<double>(), j["median_gbs"].get<double>());
  // The three read patterns timed; the bound is the best one's best pass.
  EXPECT_GT(j["one_stream_best_gbs"].get<double>(), 0.05);
  EXPECT_GT(j["four_streams_best_gbs"].get<double>(), 0.05);
  EXPECT_GT(j["one_stream_prefetched_best_gbs"].get<double>(), 0.05);
  EXPECT_DOUBLE_EQ(j["best_gbs"].get<double>(),
                   std::max({j["one_stream_best_gbs"].get<double>(), j["four_streams_best_gbs"].get<double>(),
                             j["one_stream_prefetched_best_gbs"].get<double>()}));
  // Shares that do not divide into whole lines: the four-stream and prefetched passes still read
  // every word once (the command checks them against the plain pass and fails otherwise).
  const CliResult odd = run_gatedlm({"bench", "bandwidth", "--size-mib", "1", "--reps", "1", "--threads", "3"});
  EXPECT_EQ(odd.exit_code, 0) << odd.output;
  const CliResult bad = run_gatedlm({"bench", "bandwidth", "--size-mib", "0"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("--size-mib"), std::string::npos) << bad.output;
}

// d 32, 2 layers of 2 heads of 16 (kv: 1 head), FFN 32, vocab 40, untied; every matrix's rows a
// whole number of Q8_0 blocks. Per layer q 32x32, k and v 16x32, o 32x32, gate|up 64x32,
// down 32x32 and 4 norm vectors (input and post-attention 32, q and k 16); the final norm 32;
// the LM head 40x32; of the embedding, one row of 32.
TEST(BenchBandwidthCliTest, BenchGenerateCountsTheWeightsAStepReads) {
  TempDir dir("bench_bandwidth");
  write_file(dir / "tiny.json",
             R"({"vocab_size": 40, "d_model": 32, "n_layers": 2, "n_heads": 2, "n_kv_heads": 1, "head_dim": 16,
                 "ffn_hidden": 32, "max_seq_len": 32})");
  const int64_t matrices = 2 * (32 * 32 + 2 * 16 * 32 + 32 * 32 + 64 * 32 + 32 * 32) + 40 * 32, embedding_row = 32;
  const int64_t vectors = 2 * (32 + 32 + 16 + 16) + 32;
  for (const char* weights : {"f32", "q8_0"}) {
    const CliResult r = run_gatedlm({"bench", "generate", "--config", (dir / "tiny.json").string(), "--batch", "1",
                                     "--prompt-tokens", "4", "--new-tokens", "2", "--reps", "1", "--weights", weights,
                                     "--bandwidth-gbs", "10"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const nlohmann::json j = bandwidth_json(r.output);
    // Q8_0: 34 bytes per 32 values of every matrix, the embedding's too; the vectors stay fp32.
    const int64_t want = std::string(weights) == "f32" ? 4 * (matrices + embedding_row + vectors)
                                                       : (matrices + embedding_row) / 32 * 34 + 4 * vectors;
    EXPECT_EQ(j["decode_bytes_per_token"], want) << weights;
    EXPECT_EQ(j["bandwidth_gbs"], 10.0);
    const nlohmann::json& run = j["runs"][0];
    const double read = run["decode_tokens_per_s"].get<double>() * static_cast<double>(want) / 1e9;
    EXPECT_NEAR(run["decode_read_gbs"].get<double>(), read, 1e-9 * read);
    EXPECT_NEAR(run["decode_read_share"].get<double>(), read / 10.0, 1e-9 * read);
    // The state a step reads: 2 layers' keys and values, one kv head of 16 fp32 values each,
    // over 5 and 6 rows (the prompt's 4, then each step's own), 5.5 on average.
    const int64_t state = 2 * 2 * 16 * 4 * 11 / 2;
    EXPECT_EQ(run["decode_state_bytes_per_sequence"], state) << weights;
    const double with_state = run["decode_tokens_per_s"].get<double>() * static_cast<double>(want + state) / 1e9;
    EXPECT_NEAR(run["decode_read_gbs_with_state"].get<double>(), with_state, 1e-9 * with_state);
    EXPECT_NEAR(run["decode_read_share_with_state"].get<double>(), with_state / 10.0, 1e-9 * with_state);
  }
}

// The bound measured by bench generate itself streams a 1 GiB buffer; its peak_rss_bytes is
// the model's run (the buffer is measured first and given back), so a tiny model's peak is
// far below that buffer.
TEST(BenchBandwidthCliTest, BenchGeneratePeakMemoryLeavesOutTheBoundsBuffer) {
  TempDir dir("bench_bandwidth_rss");
  write_file(dir / "tiny.json",
             R"({"vocab_size": 40, "d_model": 32, "n_layers": 2, "n_heads": 2, "n_kv_heads": 1, "head_dim": 16,
                 "ffn_hidden": 32, "max_seq_len": 32})");
  const CliResult r = run_gatedlm({"bench", "generate", "--config", (dir / "tiny.json").string(), "--batch", "1",
                                   "--prompt-tokens", "4", "--new-tokens", "2", "--reps", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json j = bandwidth_json(r.output);
  EXPECT_GT(j["bandwidth_gbs"].get<double>(), 0.0);
  EXPECT_GT(j["peak_rss_bytes"].get<int64_t>(), 0);
  EXPECT_LT(j["peak_rss_bytes"].get<int64_t>(), int64_t{512} << 20) << "the bound's 1 GiB buffer counted";
}

}  // namespace
}  // namespace gatedlm::testing
