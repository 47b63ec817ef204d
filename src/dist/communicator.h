#pragma once
// The ranks of a data-parallel run and the few collectives the trainer needs, behind one
// small interface that train/ receives (design.md: nothing below train/ knows MPI).
// Two implementations: one process (rank 0 of 1, every collective is the identity) and
// MPI (mpi_communicator.cpp, compiled in when CMake finds MPI).
#include <cstddef>
#include <memory>
#include <span>
#include <string>

namespace gatedlm::dist {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In-place elementwise sum over all ranks. Deterministic by construction: each element
  // is the sum of the ranks' values added in rank order (rank 0 first), and every rank
  // ends with the same bits, whatever the transport or the message size.
  virtual void allreduce_sum(std::span<double> data) = 0;
  virtual void allreduce_sum(std::span<float> data) = 0;
  // Every rank's `data` (same size everywhere) becomes root's.
  virtual void broadcast(std::span<std::byte> data, int root) = 0;
  // all = rank 0's `mine`, then rank 1's, ...: all.size() == size() * mine.size().
  virtual void allgather(std::span<const std::byte> mine, std::span<std::byte> all) = 0;
  virtual void barrier() = 0;
  // Stops every rank of the job with exit code `code`, after this rank prints `why`.
  [[noreturn]] virtual void abort(const std::string& why, int code) = 0;
  // "1 process" or "Open MPI v4.1.4, 2 ranks": for log lines.
  virtual std::string describe() const = 0;
};

// The one-process stand-in.
std::unique_ptr<Communicator> single_process();

// MPI when this binary has it built in and was started by an MPI launcher (mpirun,
// mpiexec, srun --mpi=pmix: the launcher's environment variables say so); otherwise
// single_process(). MPI is initialised here and finalised when the object is destroyed.
std::unique_ptr<Communicator> from_environment();

// For `gatedlm --version`: "Open MPI v4.1.4" or "not built in".
std::string mpi_build_info();

}  // namespace gatedlm::dist
