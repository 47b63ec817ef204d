#include "train/metrics_log.h"

#include <string_view>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_file.h"

namespace gatedlm::train {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool is_blank(std::string_view line) { return line.find_first_not_of(" \t\r") == std::string_view::npos; }

// One line as a JSON object, or why it is not one (empty when it is).
std::string parse_record(std::string_view line, const std::string& source, json& record) {
  try {
    record = parse_json_strict(line, source);
  } catch (const Error& e) {
    return e.what();
  }
  if (!record.is_object()) return cat(source, ": not a JSON object (", record.type_name(), ")");
  return "";
}

}  // namespace

MetricsLog read_metrics_log(const fs::path& file, IfMissing if_missing) {
  std::error_code ec;
  if (if_missing == IfMissing::empty && !fs::exists(file, ec)) return {};
  const std::string text = read_whole_file(file.string(), "metrics log");
  MetricsLog log;
  int64_t line_number = 0;
  for (size_t begin = 0; begin < text.size();) {
    const size_t newline = text.find('\n', begin);
    const bool terminated = newline != std::string::npos;
    const size_t end = terminated ? newline : text.size();
    const std::string_view line(text.data() + begin, end - begin);
    begin = end + 1;
    ++line_number;
    const bool last = text.find_first_not_of(" \t\r\n", begin) == std::string::npos;  // blanks may follow
    if (is_blank(line)) continue;
    const std::string source = cat(file.string(), ":", line_number);
    json record;
    const std::string problem = parse_record(line, source, record);
    if (last && (!terminated || !problem.empty())) {
      log.dropped_last_line =
          cat(source, ": the last line is cut short (", terminated ? problem : "no line end",
              "; the run stopped while writing it, or is still writing), dropped");
      break;
    }
    if (!problem.empty()) fail(problem, " (only the last line of a metrics log may be cut short)");
    log.records.push_back(std::move(record));
  }
  return log;
}

int64_t record_step(const json& record) {
  const auto it = record.find("step");
  return it != record.end() && it->is_number_integer() ? it->get<int64_t>() : -1;
}

bool has_evaluation_record(const fs::path& file, int64_t step) {
  for (const json& record : read_metrics_log(file, IfMissing::empty).records)
    if (record.contains("val_loss") && record_step(record) == step) return true;
  return false;
}

std::optional<std::string> keep_records_through_step(const fs::path& file, int64_t last_step) {
  std::error_code ec;
  if (!fs::exists(file, ec)) return std::nullopt;
  const MetricsLog log = read_metrics_log(file);
  std::string kept;
  // The writer's own dump: parsing and dumping again gives each line's bytes back.
  for (const json& record : log.records)
    if (record_step(record) <= last_step) kept += record.dump() + "\n";
  write_file_atomic(file.string(), kept);
  return log.dropped_last_line;
}

MetricsWriter::MetricsWriter(const fs::path& file) : file_(file), out_(file, std::ios::app) {
  if (!out_) fail(file_.string(), ": cannot write the metrics log");
}

void MetricsWriter::append(const json& record) {
  out_ << record.dump() << "\n" << std::flush;
  if (!out_) fail(file_.string(), ": cannot write the metrics log (is the disk full?)");
}

}  // namespace gatedlm::train
