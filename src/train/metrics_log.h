#pragma once
// RUN/metrics.jsonl, a run's training log: one JSON object per line, each line ended by
// '\n', appended and flushed by the trainer (rank 0) after every step, evaluation and probe.
// Its one writer and its one reader; every program that reads the log (trainer, sweep,
// demo, report) goes through read_metrics_log, so all treat a damaged file the same way.
//
// The policy for a file cut short. A run killed mid-write (SIGKILL, power loss, a full
// disk), or a log read while its run is still writing, can end in a partial record. So:
//   - the LAST line, when it is not ended by '\n' or is not one JSON object, is dropped,
//     and the result says so (MetricsLog::dropped_last_line names the file, line and why);
//   - any OTHER line that is not one JSON object is an error (gatedlm::Error) naming the
//     file and line number: the trainer never writes such a line, so the file was edited
//     or damaged, and guessing past it would misplace every record after it;
//   - blank lines are skipped;
//   - a missing file is an error, or no records with IfMissing::empty.
// Resume stays exact because a resumed run first keeps only the records its checkpoint has
// seen (keep_records_through_step): that rewrites the file atomically, without the cut line,
// before the writer appends to it. Every record of a step <= the checkpoint's step was
// flushed whole before the checkpoint was written, so dropping a cut line loses none of them.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace gatedlm::train {

struct MetricsLog {
  std::vector<nlohmann::json> records;  // in file order, each a JSON object
  // Set when the last line was cut short and dropped: "FILE:N: the last line ... dropped".
  std::optional<std::string> dropped_last_line;
};

enum class IfMissing { fail, empty };

// Reads a metrics.jsonl under the policy above.
MetricsLog read_metrics_log(const std::filesystem::path& file, IfMissing if_missing = IfMissing::fail);

// The step a record belongs to ("step"; -1 when it has none).
int64_t record_step(const nlohmann::json& record);

// Whether the log holds the evaluation (a "val_loss" record) of `step`; false when the file
// is missing. (An evaluation cut short by a signal is not recorded: a resumed run does it.)
bool has_evaluation_record(const std::filesystem::path& file, int64_t step);

// Rewrites `file` atomically with only its records of steps <= last_step, in order (each
// line as the writer wrote it), dropping a cut last line. A missing file stays missing.
// Returns the read's dropped_last_line note, if any.
std::optional<std::string> keep_records_through_step(const std::filesystem::path& file, int64_t last_step);

// Appends records to a metrics.jsonl, one line each, flushed at once (a reader or a crash
// sees whole lines, but for the one being written).
class MetricsWriter {
 public:
  // Opens `file` for appending (created when missing); throws naming it when it cannot.
  explicit MetricsWriter(const std::filesystem::path& file);
  // Throws naming the file when the line cannot be written (a full disk).
  void append(const nlohmann::json& record);

 private:
  std::filesystem::path file_;
  std::ofstream out_;
};

}  // namespace gatedlm::train
