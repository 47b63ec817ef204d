#include "demo/models.h"

#include <cstdlib>

#include "core/error.h"
#include "core/format.h"
#include "core/stage_cache.h"
#include "model/param_layout.h"

namespace gatedlm::demo {

using nlohmann::json;

ModelPair make_models(const Preset& preset, int64_t vocab) {
  json b = preset.model;
  b["vocab_size"] = vocab;
  ModelPair pair;
  pair.baseline = model::config_from_json(b, preset.path + " (model)");
  pair.baseline_params = model::ParamLayout(pair.baseline).total();
  json g = b;
  g["gate"] = {{"position", "sdpa"}, {"granularity", "elementwise"}, {"activation", "sigmoid"}};
  // Narrow the gated model's FFN so the totals match as closely as one FFN column allows.
  int64_t best_ffn = pair.baseline.ffn_hidden, best_diff = INT64_MAX;
  for (int64_t f = pair.baseline.ffn_hidden; f >= 1; --f) {
    g["ffn_hidden"] = f;
    const int64_t total = model::ParamLayout(model::config_from_json(g, "gated")).total();
    const int64_t diff = total - pair.baseline_params;
    if (std::llabs(diff) < std::llabs(best_diff)) best_diff = diff, best_ffn = f;
    if (diff < 0) break;  // fewer columns only move further away
  }
  g["ffn_hidden"] = best_ffn;
  pair.gated = model::config_from_json(g, "gated");
  const model::ParamLayout gl(pair.gated);
  pair.gated_params = gl.total();
  pair.gate_params = gl.count(model::ParamKind::gate);
  return pair;
}

std::string describe_models(const ModelPair& m) {
  const int64_t diff = m.gated_params - m.baseline_params;
  const double percent = 100.0 * static_cast<double>(diff) / static_cast<double>(m.baseline_params);
  return cat("baseline ", thousands(m.baseline_params), " parameters (ffn_hidden ", m.baseline.ffn_hidden, "); gated ",
             thousands(m.gated_params), " (ffn_hidden ", m.gated.ffn_hidden, ", gate ", thousands(m.gate_params),
             "); difference ", diff >= 0 ? "+" : "", thousands(diff), " (", signed_fixed(percent, 3), "%)");
}

std::vector<RunInfo> make_runs(const std::filesystem::path& out, const ModelPair& models) {
  std::vector<RunInfo> runs(2);
  runs[0].name = "baseline";
  runs[0].label = "(1) Baseline";
  runs[0].config = models.baseline;
  runs[1].name = "gated-sdpa";
  runs[1].label = "(2) SDPA Elementwise Gate";
  runs[1].config = models.gated;
  for (RunInfo& r : runs) {
    r.dir = (out / "runs" / r.name).string();
    r.config_path = (out / "configs" / (r.name + ".json")).string();
    write_if_changed(r.config_path, model::config_to_json(r.config).dump(2) + "\n");
  }
  return runs;
}

}  // namespace gatedlm::demo
