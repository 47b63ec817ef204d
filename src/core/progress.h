#pragma once
// A progress line on stderr: redrawn in place on a terminal, printed every few seconds
// otherwise (logs, CI), so long work always shows where it is and how long is left.
#include <chrono>
#include <cstdint>
#include <string>

namespace gatedlm {

class Progress {
 public:
  Progress(std::string label, int64_t total, double log_interval_s = 10.0);
  // done: units finished so far; extra: text shown after the bar (loss, tokens/s...).
  void update(int64_t done, const std::string& extra = "");
  void finish(const std::string& extra = "");
  // A last line at `done` when the work stops short of its total (a paused segment): the
  // bar where it stopped, no ETA.
  void stop(int64_t done, const std::string& extra = "");
  // The total once it is known (a time budget's steps are planned after the first few).
  void set_total(int64_t total) { total_ = total; }
  static std::string format_duration(double seconds);

 private:
  void draw(int64_t done, const std::string& extra, bool final);
  std::string label_;
  int64_t total_;
  double log_interval_s_;
  bool tty_;
  std::chrono::steady_clock::time_point start_, last_draw_;
  bool drawn_ = false;
};

}  // namespace gatedlm
