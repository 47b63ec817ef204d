#pragma once
// The demo's measurements after training, per run: the held-out evaluation
// (RUN/heldout.json, its key inside) and the analysis (RUN/analysis.json + RUN/analysis.key:
// attention sink, massive activations, gate statistics over validation windows). Each is
// redone only when the run or its inputs changed.
#include <vector>

#include "core/stage_cache.h"
#include "demo/models.h"
#include "demo/prepare.h"
#include "demo/preset.h"
#include "demo/text_sources.h"
#include "train/train_config.h"

namespace gatedlm::demo {

struct FinalEvalInputs {
  const Preset& preset;
  const TextSources& texts;
  const PreparedData& data;
  const train::TrainConfig& tc;  // batch size and window length of the held-out evaluation
};

// Skips diverged runs.
void evaluate_runs(const std::vector<RunInfo>& runs, const FinalEvalInputs& in, bool fresh, const StageLog& log);

}  // namespace gatedlm::demo
