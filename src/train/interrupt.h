#pragma once
// SIGINT / SIGTERM during training. The handler only sets a flag; the training loop polls
// it between micro-batches and steps, and evaluations poll it between batches, so a stop
// always lands on a state that can be checkpointed. A second Ctrl-C, once the run is
// saving to stop, kills the process at once (allow_immediate_stop).
#include <csignal>

namespace gatedlm::train {

// Installs the handler for SIGINT and SIGTERM and clears the flag for as long as it lives;
// the previous handlers come back when it is destroyed.
class InterruptHandling {
 public:
  InterruptHandling();
  ~InterruptHandling();
  InterruptHandling(const InterruptHandling&) = delete;
  InterruptHandling& operator=(const InterruptHandling&) = delete;

  // Whether a signal (or request()) asked the run to stop.
  static bool requested();
  // Asks the run to stop as if a signal had come: another rank was interrupted, or an
  // evaluation was cut short.
  static void request();
  // SIGINT back to its default: a second Ctrl-C while the run saves stops it at once.
  static void allow_immediate_stop();

 private:
  using Handler = void (*)(int);
  Handler previous_int_, previous_term_;
};

}  // namespace gatedlm::train
