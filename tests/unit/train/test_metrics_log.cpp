// train/metrics_log.h: the one writer and reader of metrics.jsonl, and its policy for a
// file cut short (a cut LAST line is dropped and reported; a bad line elsewhere is an error
// naming the file and line).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_files.h"
#include "train/metrics_log.h"

namespace gatedlm::train {
namespace {

using gatedlm::testing::contains;
using gatedlm::testing::error_of;
using gatedlm::testing::read_file;
using gatedlm::testing::TempDir;
using gatedlm::testing::write_file;
using nlohmann::json;
namespace fs = std::filesystem;

// Three records as the trainer writes them: two steps and an evaluation.
std::vector<json> sample_records() {
  return {json{{"step", 1}, {"loss", 5.4321987654321}, {"lr", 1e-4}, {"tokens_per_s", 1234.5}},
          json{{"step", 2}, {"loss", 5.1}, {"spike", true}, {"grad_norm", 0.30000000000000004}},
          json{{"step", 2}, {"val_loss", 4.9}, {"val_bpb", 7.06}, {"val_tokens", 4096}}};
}

TEST(MetricsLog, WrittenRecordsReadBackInOrder) {
  TempDir dir("metrics_log");
  const std::vector<json> records = sample_records();
  {
    MetricsWriter writer(dir / "metrics.jsonl");
    for (const json& r : records) writer.append(r);
  }
  {  // a second writer appends after the first's lines (a resumed run)
    MetricsWriter writer(dir / "metrics.jsonl");
    writer.append(json{{"step", 3}, {"loss", 4.8}});
  }
  const MetricsLog log = read_metrics_log(dir / "metrics.jsonl");
  ASSERT_EQ(log.records.size(), 4u);
  for (size_t i = 0; i < records.size(); ++i) EXPECT_EQ(log.records[i], records[i]) << i;
  EXPECT_EQ(record_step(log.records[3]), 3);
  EXPECT_FALSE(log.dropped_last_line.has_value());
  // One line per record, each ended by '\n'.
  const std::string text = read_file(dir / "metrics.jsonl");
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 4);
  EXPECT_EQ(text.back(), '\n');
}

TEST(MetricsLog, UnterminatedLastLineIsDroppedAndReported) {
  TempDir dir("metrics_log");
  write_file(dir / "metrics.jsonl", "{\"step\": 1, \"loss\": 5.5}\n{\"step\": 2, \"lo");
  const MetricsLog log = read_metrics_log(dir / "metrics.jsonl");
  ASSERT_EQ(log.records.size(), 1u);
  EXPECT_EQ(log.records[0]["loss"], 5.5);
  ASSERT_TRUE(log.dropped_last_line.has_value());
  EXPECT_TRUE(contains(*log.dropped_last_line, (dir / "metrics.jsonl").string() + ":2:")) << *log.dropped_last_line;
  EXPECT_TRUE(contains(*log.dropped_last_line, "dropped")) << *log.dropped_last_line;
}

TEST(MetricsLog, WholeButUnterminatedLastLineIsDroppedToo) {
  // Its writer had not yet ended the line: a reader cannot tell it from a cut one.
  TempDir dir("metrics_log");
  write_file(dir / "metrics.jsonl", "{\"step\": 1, \"loss\": 5.5}\n{\"step\": 2, \"loss\": 5.0}");
  const MetricsLog log = read_metrics_log(dir / "metrics.jsonl");
  EXPECT_EQ(log.records.size(), 1u);
  EXPECT_TRUE(log.dropped_last_line.has_value());
}

TEST(MetricsLog, TerminatedButUnparsableLastLineIsDropped) {
  // A crash that extended the file before its bytes reached the disk leaves zeros.
  TempDir dir("metrics_log");
  const char zeros[] = "{\"step\": 1, \"loss\": 5.5}\n\0\0\0\n\n";
  write_file(dir / "metrics.jsonl", std::string(zeros, sizeof zeros - 1));
  const MetricsLog log = read_metrics_log(dir / "metrics.jsonl");
  EXPECT_EQ(log.records.size(), 1u);
  ASSERT_TRUE(log.dropped_last_line.has_value());
  EXPECT_TRUE(contains(*log.dropped_last_line, ":2:")) << *log.dropped_last_line;
}

TEST(MetricsLog, BadMiddleLineIsAnErrorNamingFileAndLine) {
  TempDir dir("metrics_log");
  const fs::path file = dir / "metrics.jsonl";
  write_file(file, "{\"step\": 1, \"loss\": 5.5}\n\n{\"step\": 2, \"lo\n{\"step\": 3, \"loss\": 5.0}\n");
  const std::string message = error_of([&] { read_metrics_log(file); });
  EXPECT_TRUE(contains(message, file.string() + ":3:")) << message;  // the blank line 2 is counted
  // Not an object, or a key given twice: errors too.
  write_file(file, "[1, 2]\n{\"step\": 3}\n");
  EXPECT_TRUE(contains(error_of([&] { read_metrics_log(file); }), ":1: not a JSON object"));
  write_file(file, "{\"step\": 1, \"step\": 2}\n{\"step\": 3}\n");
  EXPECT_TRUE(contains(error_of([&] { read_metrics_log(file); }), "appears twice"));
}

TEST(MetricsLog, EmptyFileHasNoRecords) {
  TempDir dir("metrics_log");
  write_file(dir / "metrics.jsonl", "");
  MetricsLog log = read_metrics_log(dir / "metrics.jsonl");
  EXPECT_TRUE(log.records.empty());
  EXPECT_FALSE(log.dropped_last_line.has_value());
  write_file(dir / "metrics.jsonl", "\n  \n");  // blank lines are skipped
  log = read_metrics_log(dir / "metrics.jsonl");
  EXPECT_TRUE(log.records.empty());
  EXPECT_FALSE(log.dropped_last_line.has_value());
}

TEST(MetricsLog, MissingFileIsAnErrorUnlessAskedForEmpty) {
  TempDir dir("metrics_log");
  const fs::path file = dir / "metrics.jsonl";
  EXPECT_TRUE(contains(error_of([&] { read_metrics_log(file); }), file.string()));
  const MetricsLog log = read_metrics_log(file, IfMissing::empty);
  EXPECT_TRUE(log.records.empty());
  EXPECT_FALSE(log.dropped_last_line.has_value());
}

TEST(MetricsLog, KeepRecordsThroughStepKeepsTheWritersBytes) {
  TempDir dir("metrics_log");
  const fs::path file = dir / "metrics.jsonl";
  {
    MetricsWriter writer(file);
    for (const json& r : sample_records()) writer.append(r);
  }
  const std::string through_step_2 = read_file(file);
  {
    MetricsWriter writer(file);
    writer.append(json{{"step", 3}, {"loss", 4.8}});
  }
  std::ofstream(file, std::ios::app) << "{\"step\": 4, \"lo";  // killed mid-write
  const std::optional<std::string> dropped = keep_records_through_step(file, 2);
  EXPECT_TRUE(dropped.has_value());
  EXPECT_EQ(read_file(file), through_step_2);  // byte for byte: a resume's log is a straight run's
  EXPECT_FALSE(read_metrics_log(file).dropped_last_line.has_value());
  // A missing file stays missing.
  EXPECT_FALSE(keep_records_through_step(dir / "none.jsonl", 2).has_value());
  EXPECT_FALSE(fs::exists(dir / "none.jsonl"));
}

TEST(MetricsLog, WriterRefusesAnUnwritablePath) {
  TempDir dir("metrics_log");
  const std::string message = error_of([&] { MetricsWriter writer(dir / "no_such_dir" / "metrics.jsonl"); });
  EXPECT_TRUE(contains(message, "no_such_dir")) << message;
}

}  // namespace
}  // namespace gatedlm::train
