#pragma once
// The demo's speed probe: seconds per training step and forward tokens per second of one
// model, measured on the real batches (a few steps from freshly initialised weights).
#include <cstdint>
#include <vector>

#include "model/config.h"
#include "train/train_config.h"

namespace gatedlm::demo {

struct Speed {
  double step_s = 0;   // one optimizer step
  double fwd_tps = 0;  // evaluation tokens per second
};

Speed measure_speed(const model::ModelConfig& config, const train::TrainConfig& tc, const std::vector<int32_t>& train,
                    const std::vector<int32_t>& val, int32_t bos);

}  // namespace gatedlm::demo
