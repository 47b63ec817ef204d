#include "gil.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "train/interrupt.h"

namespace gatedlm::python {

namespace {

std::atomic<bool> g_exiting{false};  // atexit has run: nobody asks for the GIL any more
std::atomic<std::thread::id> g_exit_thread{};  // but the thread that ran it (atexit
                                               // handlers after ours may still call in)
std::atomic<int> g_asking{0};        // threads between ask_for_gil() and holding the GIL
std::atomic<int> g_in_engine{0};     // ReleaseGil sections open, over all threads, parked ones not counted
thread_local int t_depth = 0;        // ReleaseGil sections open on this thread

[[noreturn]] void park() {
  g_in_engine.fetch_sub(t_depth);
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

// Counted as asking before the flag is read, so that the exit hook either sees this thread
// asking (and waits for it) or this thread sees the flag (and parks): never neither.
void ask_for_gil() {
  g_asking.fetch_add(1);
  if (g_exiting.load() && g_exit_thread.load() != std::this_thread::get_id()) {
    g_asking.fetch_sub(1);
    park();
  }
}

// Python's atexit, on the main thread: from here on no thread takes the GIL back; trainings
// are asked to stop (as on Ctrl-C), and the exit waits, without the GIL, until every thread
// that was in the engine has left it (parked, or back in Python with the GIL it was asking
// for). Only then do the process's static objects go, which a thread still computing in
// the engine would otherwise use after their destruction.
void on_interpreter_exit() {
  g_exit_thread.store(std::this_thread::get_id());
  g_exiting.store(true);
  train::InterruptHandling::stop_every_run();
  PyThreadState* main = PyEval_SaveThread();
  while (g_asking.load() > 0 || g_in_engine.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  PyEval_RestoreThread(main);
}

}  // namespace

ReleaseGil::ReleaseGil() : state_(PyEval_SaveThread()) {
  ++t_depth;
  g_in_engine.fetch_add(1);
}

ReleaseGil::~ReleaseGil() {
  ask_for_gil();
  PyEval_RestoreThread(state_);
  g_asking.fetch_sub(1);
  --t_depth;
  g_in_engine.fetch_sub(1);
}

AcquireGil::AcquireGil() {
  ask_for_gil();
  state_ = PyGILState_Ensure();
  g_asking.fetch_sub(1);
}

AcquireGil::~AcquireGil() { PyGILState_Release(state_); }

void bind_gil_exit(pybind11::module_& m) {
  pybind11::module_::import("atexit").attr("register")(pybind11::cpp_function(&on_interpreter_exit));
}

}  // namespace gatedlm::python
