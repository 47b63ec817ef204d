#include "train/interrupt.h"

#include <atomic>

namespace gatedlm::train {

namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void on_interrupt(int) { g_interrupted = true; }

}  // namespace

InterruptHandling::InterruptHandling() {
  g_interrupted = false;
  previous_int_ = std::signal(SIGINT, on_interrupt);
  previous_term_ = std::signal(SIGTERM, on_interrupt);
}

InterruptHandling::~InterruptHandling() {
  std::signal(SIGINT, previous_int_);
  std::signal(SIGTERM, previous_term_);
}

bool InterruptHandling::requested() { return g_interrupted.load(); }

void InterruptHandling::request() { g_interrupted = true; }

void InterruptHandling::allow_immediate_stop() { std::signal(SIGINT, SIG_DFL); }

}  // namespace gatedlm::train
