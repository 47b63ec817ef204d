#include "core/thread_governor.h"

#include <dirent.h>
#include <fcntl.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <mutex>

namespace gatedlm {

ThreadGovernor::ThreadGovernor(int max_threads, int cores)
    : max_threads_(std::max(1, max_threads)), cores_(std::max(1, cores)), threads_(max_threads_) {}

int ThreadGovernor::observe(int others_runnable) {
  const int want = std::clamp(cores_ - std::max(0, others_runnable), 1, max_threads_);
  if (want == threads_) {
    direction_ = streak_ = 0;
    return threads_;
  }
  const int direction = want < threads_ ? -1 : 1;
  if (direction != direction_) {
    direction_ = direction;
    streak_ = 0;
    bound_ = want;
  }
  ++streak_;
  bound_ = direction < 0 ? std::max(bound_, want) : std::min(bound_, want);
  if (streak_ >= (direction < 0 ? kSamplesToShrink : kSamplesToGrow)) {
    threads_ = bound_;
    direction_ = streak_ = 0;
  }
  return threads_;
}

int parse_runnable_tasks(std::string_view loadavg) {
  // Skip the three load averages; the fourth field is RUNNABLE/TOTAL.
  size_t at = 0;
  for (int field = 0; field < 3; ++field) {
    at = loadavg.find(' ', at);
    if (at == std::string_view::npos) return -1;
    ++at;
  }
  int n = 0, digits = 0;
  for (; at < loadavg.size() && loadavg[at] >= '0' && loadavg[at] <= '9' && digits < 9; ++at, ++digits)
    n = n * 10 + (loadavg[at] - '0');
  if (digits == 0 || at >= loadavg.size() || loadavg[at] != '/') return -1;
  return n;
}

char parse_task_state(std::string_view task_stat) {
  // "PID (COMM) S ...": COMM may hold spaces and parentheses, so the state follows the last ')'.
  const size_t close = task_stat.rfind(')');
  if (close == std::string_view::npos || close + 2 >= task_stat.size() || task_stat[close + 1] != ' ') return 0;
  return task_stat[close + 2];
}

namespace {

// A small /proc file read with plain system calls (no allocation beyond the buffer).
std::string_view read_small(const char* path, char* buf, size_t size) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  const ssize_t n = ::read(fd, buf, size);
  ::close(fd);
  return n > 0 ? std::string_view(buf, static_cast<size_t>(n)) : std::string_view();
}

// This process's runnable threads (spinning OpenMP workers included); -1 when unreadable.
int own_runnable_threads() {
  DIR* dir = ::opendir("/proc/self/task");
  if (!dir) return -1;
  int running = 0;
  char path[64], buf[512];
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::snprintf(path, sizeof(path), "/proc/self/task/%.20s/stat", e->d_name);
    if (parse_task_state(read_small(path, buf, sizeof(buf))) == 'R') ++running;
  }
  ::closedir(dir);
  return running;
}

// Other programs' runnable threads now; -1 when /proc cannot tell.
int others_runnable() {
  char buf[128];
  const int ours_before = own_runnable_threads();
  const int machine = parse_runnable_tasks(read_small("/proc/loadavg", buf, sizeof(buf)));
  const int ours_after = own_runnable_threads();
  if (ours_before < 0 || machine < 0) return -1;
  // Our workers may fall asleep between the reads: count the larger, so that a worker is
  // never taken for another program.
  return std::max(0, machine - std::max(ours_before, ours_after));
}

struct Governed {
  bool adaptive = false;
  int max_threads_seen = 1;  // OpenMP's count at start: the fixed one, or the adaptive maximum
  std::string fixed_reason;
  std::mutex mutex;  // one sampler at a time
  ThreadGovernor governor{1, 1};
  std::atomic<int> threads{1};
  std::atomic<int64_t> next_sample_ns{0};

  Governed() {
    const int max_threads = omp_get_max_threads(), cores = omp_get_num_procs();
    max_threads_seen = max_threads;
    const char* mode = std::getenv("GATEDLM_THREADS");
    if (std::getenv("OMP_NUM_THREADS")) {
      fixed_reason = "OMP_NUM_THREADS";
    } else if (mode && std::string_view(mode) == "fixed") {
      fixed_reason = "GATEDLM_THREADS=fixed";
    } else if (max_threads < 2) {
      fixed_reason = "one core";
    } else if (others_runnable() < 0) {
      fixed_reason = "/proc/loadavg or /proc/self/task unreadable";
    } else {
      adaptive = true;
      governor = ThreadGovernor(max_threads, cores);
      threads = max_threads;
    }
  }
  static Governed& get() {
    static Governed g;
    return g;
  }
};

constexpr int64_t kSampleIntervalNs = 100'000'000;  // 100 ms

}  // namespace

void adapt_openmp_threads() {
  if (omp_in_parallel()) return;
  Governed& g = Governed::get();
  if (!g.adaptive) return;
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  if (now >= g.next_sample_ns.load(std::memory_order_relaxed)) {
    std::unique_lock<std::mutex> lock(g.mutex, std::try_to_lock);
    if (lock.owns_lock() && now >= g.next_sample_ns.load(std::memory_order_relaxed)) {
      g.next_sample_ns.store(now + kSampleIntervalNs, std::memory_order_relaxed);
      const int others = others_runnable();
      if (others >= 0) g.threads.store(g.governor.observe(others), std::memory_order_relaxed);
    }
  }
  const int want = g.threads.load(std::memory_order_relaxed);
  if (omp_get_max_threads() != want) omp_set_num_threads(want);
}

std::string openmp_threads_description() {
  Governed& g = Governed::get();
  if (!g.adaptive)
    return "fixed at " + std::to_string(g.max_threads_seen) + " (" + g.fixed_reason + ")";
  return "adaptive, up to " + std::to_string(g.max_threads_seen) +
         " (fewer while other programs are runnable; OMP_NUM_THREADS or GATEDLM_THREADS=fixed fixes the count)";
}

}  // namespace gatedlm
