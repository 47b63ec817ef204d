#include "train/interrupt.h"

#include <mutex>

#include "core/signal_handlers.h"

namespace gatedlm::train {

namespace {

// Signals received so far: a lock-free atomic, which a handler may touch.
std::atomic<uint64_t> g_signals{0};
std::atomic<bool> g_stop_every_run{false};
static_assert(std::atomic<uint64_t>::is_always_lock_free);
extern "C" void on_interrupt(int) { g_signals.fetch_add(1, std::memory_order_relaxed); }

// The runs alive and the handlers that were there before the first of them.
struct Installed {
  std::mutex mutex;
  int runs = 0;
  struct sigaction previous_int {}, previous_term {};
};
Installed& installed() {
  static Installed i;
  return i;
}

}  // namespace

InterruptHandling::InterruptHandling() {
  Installed& i = installed();
  const std::lock_guard<std::mutex> lock(i.mutex);
  if (i.runs++ == 0) {
    i.previous_int = core::install_signal_handler(SIGINT, on_interrupt);
    i.previous_term = core::install_signal_handler(SIGTERM, on_interrupt);
  }
  signals_at_start_ = g_signals.load();
}

InterruptHandling::~InterruptHandling() {
  Installed& i = installed();
  const std::lock_guard<std::mutex> lock(i.mutex);
  if (--i.runs == 0) {
    core::restore_signal_handler(SIGINT, i.previous_int);
    core::restore_signal_handler(SIGTERM, i.previous_term);
  }
}

bool InterruptHandling::requested() const {
  return requested_.load() || g_signals.load() != signals_at_start_ || g_stop_every_run.load();
}

void InterruptHandling::stop_every_run() { g_stop_every_run = true; }

void InterruptHandling::allow_immediate_stop() { std::signal(SIGINT, SIG_DFL); }

}  // namespace gatedlm::train
