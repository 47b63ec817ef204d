#pragma once
// How many OpenMP threads to run while other programs compete for the cores.
//
// libgomp's idle threads spin before they sleep. When another program holds a core, a
// parallel region's threads wait at every barrier for the one that was descheduled, and a
// training step (hundreds of regions) slows by 10x to 1000x. Passive waiting avoids that but
// costs a quiet run 7-30 % (bench/RESULTS.md, "Shared cores"). So the default keeps the spin
// and runs fewer threads while other programs are runnable: every 100 ms the thread that
// starts parallel regions compares the machine's runnable tasks (/proc/loadavg)
// with its own process's (/proc/self/task/*/stat) and runs on the cores the others leave free.
// A quiet machine keeps every thread; a fixed count (OMP_NUM_THREADS, or GATEDLM_THREADS=fixed)
// is never changed. Either way a run's numbers do not depend on the count: the kernels sum
// over partitions fixed by the sizes (kernels/product_tiles.h, kernels/fixed_chunks.h).
#include <string>
#include <string_view>

namespace gatedlm {

// The decision alone, fed one sample at a time (so it is testable without a busy machine):
// fewer threads after two samples in a row ask for fewer, more after five ask for more.
class ThreadGovernor {
 public:
  static constexpr int kSamplesToShrink = 2;
  static constexpr int kSamplesToGrow = 5;

  ThreadGovernor(int max_threads, int cores);
  // others_runnable: runnable threads of other programs in one sample. Returns the count to use.
  int observe(int others_runnable);
  int threads() const { return threads_; }

 private:
  int max_threads_, cores_, threads_;
  int direction_ = 0;  // -1: recent samples asked for fewer threads, +1: for more
  int streak_ = 0;     // how many samples in a row asked that way
  int bound_ = 0;      // the count they agree on (the most of the fewer, the least of the more)
};

// The runnable tasks on the machine from /proc/loadavg ("0.50 0.40 0.30 RUNNABLE/TOTAL LASTPID");
// -1 when the text is not of that form.
int parse_runnable_tasks(std::string_view loadavg);
// The state letter of a /proc/.../stat line (R: runnable); 0 when the line is malformed.
char parse_task_state(std::string_view task_stat);

// Called between parallel regions by a thread that starts them (cheap when no sample is
// due). Sets that thread's OpenMP thread count to the governor's; no-op inside a parallel
// region, when the count is fixed, or where /proc cannot be read.
void adapt_openmp_threads();

// One line for `gatedlm --version`: "adaptive, up to N ..." or "fixed at N (...)".
std::string openmp_threads_description();

}  // namespace gatedlm
