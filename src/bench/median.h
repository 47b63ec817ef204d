#pragma once
// The median of the benchmarks' repeated timings (the mean of the middle two for an even count).
#include <algorithm>
#include <vector>

namespace gatedlm::bench {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace gatedlm::bench
