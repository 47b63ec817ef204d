#pragma once
// Loss-spike accounting, the same for every run: after warmup, a step whose loss exceeds
// the median of the previous `window` steps' losses by more than `margin` (0.2 = 20 %).
#include <cstdint>
#include <deque>
#include <vector>

namespace gatedlm::train {

class SpikeDetector {
 public:
  SpikeDetector(int64_t window, double margin, int64_t warmup) : window_(window), margin_(margin), warmup_(warmup) {}
  // Records the loss of `step`; returns true when it is a spike.
  bool observe(int64_t step, double loss);
  const std::vector<int64_t>& spike_steps() const { return spikes_; }
  const std::deque<double>& history() const { return history_; }
  // For resume: restores the exact state.
  void restore(std::deque<double> history, std::vector<int64_t> spikes) {
    history_ = std::move(history);
    spikes_ = std::move(spikes);
  }

 private:
  int64_t window_;
  double margin_;
  int64_t warmup_;
  std::deque<double> history_;  // the last `window` losses
  std::vector<int64_t> spikes_;
};

// Median of the values (the mean of the middle two for an even count).
double median(std::vector<double> values);

}  // namespace gatedlm::train
