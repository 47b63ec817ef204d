#pragma once
// One run of a sweep (sweep.h): whether a finished run can be reused, resumed or must
// start again (its key stamp), the training itself, and the measurements written to the
// run's result.json afterwards. run_sweep (sweep.cpp) calls these in seed-major order.
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/stage_cache.h"
#include "io/token_dataset.h"
#include "sweep/spec.h"
#include "train/train_config.h"

namespace gatedlm::sweep {

// What every run of a sweep shares: the spec, the data, the validation split and the
// held-out text (encoded once, when the first run is measured).
struct SweepContext {
  const SweepSpec* spec = nullptr;
  const io::TokenDataset* data = nullptr;
  std::string data_sha;  // of the dataset's manifest.json: part of every run's key
  std::vector<int32_t> val;
  std::string heldout_name, heldout_text, heldout_sha;
  std::vector<int32_t> heldout_ids;  // encoded when first needed
  double heldout_bytes_per_token = 0;
};

// Opens the spec's data and its held-out text (a prefix long enough for heldout_tokens).
SweepContext open_sweep_context(const SweepSpec& spec, const io::TokenDataset& dataset);

// One planned run: variant x seed, its directory and the key it must have been started with.
struct SweepRun {
  const PlannedVariant* variant = nullptr;
  uint64_t seed = 0;
  train::TrainConfig config;
  std::filesystem::path dir, config_file;
  std::string data;  // the dataset directory
  std::string key;
  std::string label;  // "run 3/12: gated seed 2", for progress lines
};

SweepRun make_sweep_run(const SweepContext& ctx, const PlannedVariant& v, uint64_t seed,
                        const std::filesystem::path& out);

enum class RunOutcome { measured, interrupted };

// Brings one run to a result: reuses result.json when its key matches, else trains (from the
// start, or resuming) and measures. `eta` is appended to the progress line when training.
// The result (with "variant" and "seed") is written to DIR/result.json and returned in
// `result`; interrupted when a signal stopped the training (the run is saved).
RunOutcome complete_run(SweepContext& ctx, const SweepRun& run, const std::string& eta, StageLog& log,
                        nlohmann::json& result, bool& trained);

}  // namespace gatedlm::sweep
