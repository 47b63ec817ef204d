#pragma once
// AdamW over the whole parameter buffer, weight decay on matrices only (ndim >= 2:
// projections and embeddings), none on norms and constant gates.
#include <cstdint>
#include <span>
#include <vector>

#include "model/param_layout.h"

namespace gatedlm::train {

struct AdamWConfig {
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1;
};

template <typename T>
class AdamW {
 public:
  AdamW(const model::ParamLayout& layout, AdamWConfig config);
  // One update with learning rate lr; increments step().
  void step(std::span<T> params, std::span<const T> grads, double lr);
  int64_t steps_taken() const { return step_; }
  std::vector<T>& m() { return m_; }
  std::vector<T>& v() { return v_; }
  void set_steps_taken(int64_t s) { step_ = s; }

 private:
  const model::ParamLayout& layout_;
  AdamWConfig config_;
  std::vector<T> m_, v_;
  int64_t step_ = 0;
};

}  // namespace gatedlm::train
