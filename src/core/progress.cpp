#include "core/progress.h"

#include <algorithm>
#include <cstdio>
#include <unistd.h>

namespace gatedlm {

Progress::Progress(std::string label, int64_t total, double log_interval_s)
    : label_(std::move(label)), total_(total), log_interval_s_(log_interval_s), tty_(::isatty(2) == 1),
      start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

std::string Progress::format_duration(double s) {
  if (s < 0 || s != s) return "?";
  char buf[32];
  int total = static_cast<int>(s + 0.5);
  if (total >= 3600)
    std::snprintf(buf, sizeof buf, "%dh%02dm", total / 3600, (total / 60) % 60);
  else
    std::snprintf(buf, sizeof buf, "%dm%02ds", total / 60, total % 60);
  return buf;
}

void Progress::update(int64_t done, const std::string& extra) {
  auto now = std::chrono::steady_clock::now();
  double since = std::chrono::duration<double>(now - last_draw_).count();
  if (drawn_ && since < (tty_ ? 0.2 : log_interval_s_)) return;
  last_draw_ = now;
  draw(done, extra, false);
}

void Progress::finish(const std::string& extra) { draw(total_, extra, true); }

void Progress::stop(int64_t done, const std::string& extra) { draw(std::min(done, total_), extra, true); }

void Progress::draw(int64_t done, const std::string& extra, bool final) {
  drawn_ = true;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double frac = total_ > 0 ? static_cast<double>(done) / static_cast<double>(total_) : 1.0;
  const double eta = done > 0 ? elapsed * (1.0 - frac) / frac : -1.0;
  constexpr int kWidth = 24;
  std::string bar(kWidth, ' ');
  for (int i = 0; i < static_cast<int>(frac * kWidth + 1e-9) && i < kWidth; ++i) bar[i] = '#';
  std::fprintf(stderr, "%s%s [%s] %3.0f%% %lld/%lld  %s  elapsed %s  eta %s%s", tty_ ? "\r\033[K" : "",
               label_.c_str(), bar.c_str(), frac * 100.0, static_cast<long long>(done),
               static_cast<long long>(total_), extra.c_str(), format_duration(elapsed).c_str(),
               final ? (done < total_ ? "-" : "0m00s") : format_duration(eta).c_str(), (final || !tty_) ? "\n" : "");
  std::fflush(stderr);
}

}  // namespace gatedlm
