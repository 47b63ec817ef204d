// The MPI communicator (compiled when CMake finds MPI). Every collective is started
// non-blocking and waited for with a deadline, so a rank that died or hangs stops the
// job with a message instead of a silent hang; a rank that is killed outright is also
// noticed by the launcher (mpirun names it and ends the others).
#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "core/error.h"
#include "dist/communicator.h"

namespace gatedlm::dist {

namespace {

template <typename T>
MPI_Datatype mpi_type();
template <>
MPI_Datatype mpi_type<double>() {
  return MPI_DOUBLE;
}
template <>
MPI_Datatype mpi_type<float>() {
  return MPI_FLOAT;
}

// A positive number of seconds or MiB from the environment, else `fallback`.
double positive_env(const char* name, double fallback) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (*end != '\0' || !(v > 0)) fail("environment variable ", name, "=", text, ": expected a positive number");
  return v;
}

// True when a launcher started this process as one rank of a job.
bool launched_by_mpi() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (std::getenv(var)) return true;
  return false;
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    // Only the main thread calls MPI; OpenMP threads do the arithmetic.
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    timeout_s_ = positive_env("GATEDLM_DIST_TIMEOUT_S", 600.0);
    bucket_bytes_ = static_cast<size_t>(positive_env("GATEDLM_ALLREDUCE_BUCKET_MB", 32.0) * (1 << 20));
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void allreduce_sum(std::span<double> data) override { ordered_allreduce(data); }
  void allreduce_sum(std::span<float> data) override { ordered_allreduce(data); }

  void broadcast(std::span<std::byte> data, int root) override {
    for (size_t off = 0; off < data.size(); off += kMaxCount) {
      const int n = static_cast<int>(std::min(kMaxCount, data.size() - off));
      MPI_Request req;
      MPI_Ibcast(data.data() + off, n, MPI_BYTE, root, MPI_COMM_WORLD, &req);
      wait(req, "broadcast");
    }
  }

  void allgather(std::span<const std::byte> mine, std::span<std::byte> all) override {
    if (mine.size() > kMaxCount) fail("allgather: ", mine.size(), " bytes per rank is more than one message holds");
    if (all.size() != mine.size() * static_cast<size_t>(size_))
      fail("allgather: the output holds ", all.size(), " bytes, not ", size_, " x ", mine.size());
    MPI_Request req;
    MPI_Iallgather(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, all.data(), static_cast<int>(mine.size()),
                   MPI_BYTE, MPI_COMM_WORLD, &req);
    wait(req, "allgather");
  }

  void barrier() override {
    MPI_Request req;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    wait(req, "barrier");
  }

  [[noreturn]] void abort(const std::string& why, int code) override {
    std::fprintf(stderr, "%s\n", why.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort does not return; this is for the compiler
  }

  std::string describe() const override { return cat(mpi_build_info(), ", ", size_, " ranks"); }

 private:
  static constexpr size_t kMaxCount = INT_MAX / 2;  // elements per MPI call (counts are int)

  // Waits for `req`, polling: a transfer in flight progresses only while we poll, so the
  // first 100 ms poll without pause, then until 1 s yielding the core between polls;
  // longer, the wait is for a slow rank (rank 0 writing a checkpoint), and polls every
  // millisecond leave the core to others. Past the deadline the job stops.
  void wait(MPI_Request& req, const char* what) {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    for (;;) {
      int done = 0;
      MPI_Test(&req, &done, MPI_STATUS_IGNORE);
      if (done) return;
      const double waited = std::chrono::duration<double>(clock::now() - start).count();
      if (waited > timeout_s_)
        abort(cat("gatedlm: rank ", rank_, " of ", size_, ": the ", what, " waited ", timeout_s_,
                  " s for the other ranks (GATEDLM_DIST_TIMEOUT_S): one of them has stopped or hangs; "
                  "stopping the job (the last checkpoint resumes with --resume)"),
              3);
      if (waited > 1.0)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      else if (waited > 0.1)
        sched_yield();
    }
  }

  // A reduce-scatter written as an all-to-all plus a local sum in rank order, then an
  // allgather: the bytes each rank sends are those of a ring allreduce (2 (N-1)/N of the
  // buffer), and the order of the additions is fixed by us, not by MPI's algorithm
  // choice. Bucket by bucket, so the scratch space is one bucket.
  template <typename T>
  void ordered_allreduce(std::span<T> data) {
    if (size_ == 1 || data.empty()) return;
    const size_t bucket = std::max<size_t>(size_, std::min(kMaxCount, bucket_bytes_ / sizeof(T)));
    std::vector<int> counts(size_), displs(size_), recv_counts(size_), recv_displs(size_);
    for (size_t off = 0; off < data.size(); off += bucket) {
      const size_t n = std::min(bucket, data.size() - off);
      T* part = data.data() + off;
      // Shard s of this bucket: counts[s] elements from displs[s]; rank s sums it.
      for (int s = 0, at = 0; s < size_; ++s) {
        counts[s] = static_cast<int>(n / size_ + (static_cast<size_t>(s) < n % size_ ? 1 : 0));
        displs[s] = at;
        at += counts[s];
      }
      const int mine = counts[rank_];
      for (int q = 0; q < size_; ++q) {
        recv_counts[q] = mine;
        recv_displs[q] = q * mine;
      }
      scratch_.resize(static_cast<size_t>(mine) * size_ * sizeof(T));
      T* recv = reinterpret_cast<T*>(scratch_.data());  // [size_, mine]: rank q's copy of my shard
      MPI_Request req;
      MPI_Ialltoallv(part, counts.data(), displs.data(), mpi_type<T>(), recv, recv_counts.data(),
                     recv_displs.data(), mpi_type<T>(), MPI_COMM_WORLD, &req);
      wait(req, "gradient allreduce (all-to-all)");
      T* out = part + displs[rank_];
#pragma omp parallel for simd schedule(static)
      for (int i = 0; i < mine; ++i) {
        T acc = recv[i];
        for (int q = 1; q < size_; ++q) acc += recv[static_cast<size_t>(q) * mine + i];
        out[i] = acc;
      }
      MPI_Iallgatherv(MPI_IN_PLACE, 0, mpi_type<T>(), part, counts.data(), displs.data(), mpi_type<T>(),
                      MPI_COMM_WORLD, &req);
      wait(req, "gradient allreduce (allgather)");
    }
  }

  int rank_ = 0, size_ = 1;
  double timeout_s_ = 600.0;
  size_t bucket_bytes_ = 32u << 20;
  std::vector<std::byte> scratch_;
};

}  // namespace

std::unique_ptr<Communicator> from_environment() {
  if (!launched_by_mpi()) return single_process();
  return std::make_unique<MpiCommunicator>();
}

std::string mpi_build_info() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(text, &len);  // callable before MPI_Init
  std::string s(text, static_cast<size_t>(len));
  return s.substr(0, s.find(','));
}

}  // namespace gatedlm::dist
