#pragma once
// The cheap probe of `train --probe-every` and of the sweep's final measurements: F-Attn
// (rows t >= 1), the sink rate (eps 0.3), M-Act and the mean gate score over a fixed set of
// windows, computed by the same probes as `gatedlm analyze` (pass 1 only: no attention maps
// kept beyond what F-Attn needs, no gate control pass). The numbers equal analyze's for the
// same checkpoint and windows (`analyze --sequences W --seq-len L --seed 0`).
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>

#include "analysis/sequences.h"
#include "model/model.h"
#include "train/trainer.h"

namespace gatedlm::analysis {

// {"f_attn", "sink_rate_percent", "m_act", "gate_mean" (null without a gate),
//  "probe_windows", "probe_seq_len"} of model m over the windows.
nlohmann::json probe_summary(model::Model<float>& m, const SequenceSet& windows);

// A train::ProbeFn that keeps its own forward-only copy of the model (training's buffers and
// numbers are untouched) and draws its windows once: sample_windows(val, bos, windows,
// seq_len, seed 0).
train::ProbeFn make_training_probe();

}  // namespace gatedlm::analysis
