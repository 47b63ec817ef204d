#pragma once
// SIGINT / SIGTERM during training. The handler only counts the signal; the training loop
// polls its run's InterruptHandling between micro-batches and steps, and evaluations poll
// it between batches, so a stop always lands on a state that can be checkpointed. A second
// Ctrl-C, once the run is saving to stop, kills the process at once (allow_immediate_stop).
//
// A signal is the process's: it stops every run in progress. A request (request(): a
// Python callback that returned False, another rank that was interrupted, an evaluation
// cut short) is its own run's: trainings in other threads go on.
#include <atomic>
#include <csignal>
#include <cstdint>

namespace gatedlm::train {

// Installs the handler for SIGINT and SIGTERM while at least one run lives (the first
// installs it, the last gives the previous handlers back), and sees the signals that come
// after it was made.
class InterruptHandling {
 public:
  InterruptHandling();
  ~InterruptHandling();
  InterruptHandling(const InterruptHandling&) = delete;
  InterruptHandling& operator=(const InterruptHandling&) = delete;

  // Whether a signal since this run started, or request(), asked the run to stop.
  bool requested() const;
  // Asks this run to stop as if a signal had come.
  void request() { requested_ = true; }
  // SIGINT back to its default: a second Ctrl-C while the run saves stops it at once.
  static void allow_immediate_stop();
  // The process is ending (the Python module's exit hook): every run, now and later, stops
  // at its next check as on a signal.
  static void stop_every_run();

 private:
  uint64_t signals_at_start_;
  std::atomic<bool> requested_{false};
};

}  // namespace gatedlm::train
