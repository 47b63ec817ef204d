#pragma once
// Signal handlers that run on an alternate stack. A handler normally runs on the stack of
// the thread it interrupts, with the kernel's signal frame (the registers and the vector
// state: about 1 KB with AVX2, 3 KB with AVX-512) written just below that thread's stack
// pointer. Some code keeps live data there: a SIGINT that landed inside a oneDNN product
// during training's evaluation aborted the process with glibc's "corrupted size vs.
// prev_size" (in oneDNN's free of its scratchpad) in 6 of 40 runs, and in 0 of 40 with the
// handler on an alternate stack (tests/cli/test_signals_cli.cpp repeats it). So the
// engine's handlers are installed with SA_ONSTACK, and the installing thread (the one
// that computes, in the command line) is given an alternate stack if it has none (one that
// a sanitizer or the embedding program set up is kept). Process-directed signals go to the
// main thread unless it blocks them (Linux's choice of target).
#include <csignal>

namespace gatedlm::core {

// Installs `handler` for `signal` (SA_RESTART | SA_ONSTACK, nothing masked) and returns the
// disposition it replaces, for restore_signal_handler.
struct sigaction install_signal_handler(int signal, void (*handler)(int));
void restore_signal_handler(int signal, const struct sigaction& previous);

}  // namespace gatedlm::core
