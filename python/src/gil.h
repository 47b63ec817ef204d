#pragma once
// Releasing the GIL around the engine's work, and taking it back, safely at interpreter exit.
//
// At exit CPython 3.11 ends a daemon thread that asks for the GIL with pthread_exit, and
// the unwinding that starts there runs into a noexcept C++ destructor (pybind11's GIL
// guards are destructors) and calls std::terminate: the "terminate called without an
// active exception" abort of a process whose daemon thread was still inside generate(),
// train(callback=...) or a train_steps iterator when the interpreter went down. With these
// guards no thread asks for the GIL once the exit has begun: one that would parks for good
// (the process is ending). The exit hook asks every training to stop (as on Ctrl-C) and
// waits, without the GIL, until no thread is left computing in the engine: each parks at
// its next GIL boundary, or returns to Python with the GIL it was already asking for. A
// thread still computing when the process's static objects are destroyed would otherwise
// use them after their end (a segmentation fault at exit). bind_gil_exit registers the
// hook with atexit, which runs before the interpreter stops any thread.
#include <pybind11/pybind11.h>

namespace gatedlm::python {

// py::gil_scoped_release, parking instead of taking the GIL back once the exit has begun.
class ReleaseGil {
 public:
  ReleaseGil();
  ~ReleaseGil();
  ReleaseGil(const ReleaseGil&) = delete;
  ReleaseGil& operator=(const ReleaseGil&) = delete;

 private:
  PyThreadState* state_;
};

// py::gil_scoped_acquire for an engine thread calling back into Python (train's callback),
// parking instead once the exit has begun.
class AcquireGil {
 public:
  AcquireGil();
  ~AcquireGil();
  AcquireGil(const AcquireGil&) = delete;
  AcquireGil& operator=(const AcquireGil&) = delete;

 private:
  PyGILState_STATE state_;
};

// Registers the exit hook with Python's atexit.
void bind_gil_exit(pybind11::module_& m);

}  // namespace gatedlm::python
