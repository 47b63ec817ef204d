#include "train/spikes.h"

#include <algorithm>

namespace gatedlm::train {

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  if (v.size() % 2) return v[mid];
  const double upper = v[mid];
  const double lower = *std::max_element(v.begin(), v.begin() + mid);
  return 0.5 * (lower + upper);
}

bool SpikeDetector::observe(int64_t step, double loss) {
  // At least a tenth of the window (and 5 steps) of history before judging.
  const size_t needed = static_cast<size_t>(std::max<int64_t>(5, window_ / 10));
  bool spike = false;
  if (step >= warmup_ && history_.size() >= needed) {
    const double m = median(std::vector<double>(history_.begin(), history_.end()));
    spike = loss > m * (1.0 + margin_);
  }
  if (spike) spikes_.push_back(step);
  history_.push_back(loss);
  if (static_cast<int64_t>(history_.size()) > window_) history_.pop_front();
  return spike;
}

}  // namespace gatedlm::train
