#pragma once
// The demo's plan stage, DIR/plan.json: the preset, the budget, the step count chosen and,
// for a time budget, the speed probe's measurements (plan["calibration"]) that the segments
// hold the budget with. Reused while the preset file, the budget and the data are unchanged;
// the segments add what they re-planned (plan["replans"], plan["budget_cut"]).
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/stage_cache.h"
#include "demo/models.h"
#include "demo/plan.h"
#include "demo/prepare.h"
#include "demo/preset.h"

namespace gatedlm::demo {

struct DemoPlan {
  nlohmann::json record;             // plan.json
  train::TrainConfig tc;             // the planned training config (steps = the planned steps)
  std::optional<BudgetClock> clock;  // set for a time budget
};

struct PlanInputs {
  const Preset& preset;
  double minutes = 0;       // the whole demo's budget
  int64_t fixed_steps = 0;  // > 0: this many steps, no time budget
  const PreparedData& data;
  const ModelPair& models;
  bool heldout = false;  // a held-out evaluation follows training
};

DemoPlan make_plan(const std::filesystem::path& out, const PlanInputs& in, bool fresh, const StageLog& log);
void save_plan(const std::filesystem::path& out, const DemoPlan& plan);

}  // namespace gatedlm::demo
