#include "core/signal_handlers.h"

#include <unistd.h>

#include <algorithm>

namespace gatedlm::core {

namespace {

// Gives the calling thread an alternate signal stack unless it has one. The memory is never
// freed: the kernel may write to it until the thread ends (one per thread that installs a
// handler: the main thread, and in Python the threads that start a training).
void ensure_alternate_stack() {
  thread_local bool done = false;
  if (done) return;
  done = true;
  stack_t current{};
  if (::sigaltstack(nullptr, &current) == 0 && !(current.ss_flags & SS_DISABLE)) return;
  const long wanted = std::max<long>(64 * 1024, ::sysconf(_SC_SIGSTKSZ));
  stack_t alternate{};
  alternate.ss_sp = new char[static_cast<size_t>(wanted)];
  alternate.ss_size = static_cast<size_t>(wanted);
  ::sigaltstack(&alternate, nullptr);
}

}  // namespace

struct sigaction install_signal_handler(int signal, void (*handler)(int)) {
  ensure_alternate_stack();
  struct sigaction action {};
  action.sa_handler = handler;
  action.sa_flags = SA_RESTART | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  struct sigaction previous {};
  ::sigaction(signal, &action, &previous);
  return previous;
}

void restore_signal_handler(int signal, const struct sigaction& previous) { ::sigaction(signal, &previous, nullptr); }

}  // namespace gatedlm::core
