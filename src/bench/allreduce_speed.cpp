#include "bench/allreduce_speed.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "dist/collectives.h"

namespace gatedlm::bench {

std::vector<AllreduceTiming> measure_allreduce(dist::Communicator& comm, const std::vector<int64_t>& sizes_bytes,
                                               int reps) {
  if (reps < 1) fail("bench allreduce: --reps must be at least 1, got ", reps);
  const double ranks = comm.size();
  std::vector<AllreduceTiming> out;
  for (int64_t bytes : sizes_bytes) {
    if (bytes < 8) fail("bench allreduce: a size of ", bytes, " bytes holds no float64");
    const size_t n = static_cast<size_t>(bytes / 8);
    std::vector<double> buf(n);
    // Rank r holds r + (i mod 7): the sum is N (N-1) / 2 + N (i mod 7), exact in float64.
    auto fill = [&] {
      for (size_t i = 0; i < n; ++i) buf[i] = comm.rank() + static_cast<double>(i % 7);
    };
    bool correct = true;
    std::vector<double> seconds;
    for (int rep = -1; rep < reps; ++rep) {  // rep -1 warms up (buffers, connections)
      fill();
      comm.barrier();
      const auto t0 = std::chrono::steady_clock::now();
      comm.allreduce_sum(std::span<double>(buf));
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (rep >= 0) seconds.push_back(s);
      for (size_t i = 0; i < n; ++i)
        correct &= buf[i] == ranks * (ranks - 1) / 2 + ranks * static_cast<double>(i % 7);
    }
    std::sort(seconds.begin(), seconds.end());
    AllreduceTiming t;
    t.bytes = static_cast<int64_t>(n * 8);
    t.median_s = dist::from_root(comm, seconds[seconds.size() / 2]);
    t.min_s = dist::from_root(comm, seconds.front());
    t.algbw_gbs = static_cast<double>(t.bytes) / t.median_s / 1e9;
    t.busbw_gbs = t.algbw_gbs * 2.0 * (ranks - 1) / ranks;
    t.correct = !dist::any_rank(comm, !correct);
    out.push_back(t);
  }
  return out;
}

}  // namespace gatedlm::bench
