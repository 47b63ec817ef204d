#pragma once
// The training loop: batches, forward/backward with gradient accumulation, global-norm
// clipping, AdamW with warmup + cosine, evaluation, loss-spike accounting, metrics,
// atomic checkpoints, interrupt handling and exact resume.
#include "train/train_request.h"

namespace gatedlm::train {

// Throws gatedlm::Error on bad input and on a NaN/Inf loss or gradient (after which the
// last good checkpoint stays the latest).
TrainOutcome run_training(const TrainRequest& request);

}  // namespace gatedlm::train
