#include "train/moe_balance.h"

#include <chrono>
#include <span>

namespace gatedlm::train {

StepBalance::StepBalance(model::Model<float>& model, dist::Communicator& comm, int64_t micro_batches_here)
    : model_(model),
      comm_(comm),
      micro_batches_(micro_batches_here),
      global_(model.config().has_moe() && model.config().moe.lb_scope == model::LbScope::global) {}

void StepBalance::set_summed(std::vector<double> counts) {
  comm_.allreduce_sum(std::span<double>(counts));  // exact: integer counts below 2^53
  model_.set_balance_counts(counts);
}

void StepBalance::begin_step(const std::function<std::vector<int64_t>(int64_t)>& route) {
  seconds_ = 0;
  if (!global_ || micro_batches_ == 1) return;
  const auto t0 = std::chrono::steady_clock::now();
  model_.set_balance_counts({});
  std::vector<double> sum;
  for (int64_t i = 0; i < micro_batches_; ++i) {
    const std::vector<int64_t> counts = route(i);
    sum.resize(counts.size(), 0.0);
    for (size_t j = 0; j < counts.size(); ++j) sum[j] += static_cast<double>(counts[j]);
  }
  set_summed(std::move(sum));
  seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void StepBalance::after_forward() {
  if (!global_ || micro_batches_ > 1) return;
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<int64_t> counts = model_.expert_counts();
  set_summed(std::vector<double>(counts.begin(), counts.end()));
  seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace gatedlm::train
