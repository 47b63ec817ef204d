#pragma once
// The demo's training stage: both models, the same steps, seed, data order and schedule, in
// interleaved segments (demo/plan.h's SegmentPlanner), so that when the machine gets slower
// than the speed probe said both are cut at the same step before the budget runs out, when
// it is quiet again the cut is taken back, and when it is quicker than the probe said both
// train more steps than planned. A finished run is reused, an interrupted one
// resumed, one that diverged (non-finite loss) is not trained again.
#include <string>
#include <vector>

#include "core/stage_cache.h"
#include "demo/models.h"
#include "demo/plan_stage.h"
#include "demo/prepare.h"

namespace gatedlm::demo {

struct TrainingResult {
  bool interrupted = false;     // Ctrl-C: the runs are saved, the same command resumes them
  int64_t final_step = 0;       // the step both runs end at
  std::string contention_note;  // set when training ran much slower than the speed probe
};

// Adds the re-plans to plan.record (plan.json's "replans" and, when the runs end before the
// planned step, "budget_cut") and saves it.
// Sets each run's key (the data, its model and the planned training config).
TrainingResult train_in_segments(std::vector<RunInfo>& runs, DemoPlan& plan, const PreparedData& data,
                                 const std::filesystem::path& out, bool fresh, const StageLog& log);

}  // namespace gatedlm::demo
