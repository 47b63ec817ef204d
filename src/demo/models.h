#pragma once
// The demo's two models and their run directories: a baseline and a G1-gated model (SDPA
// output, elementwise, sigmoid) whose FFN is narrowed so that the parameter totals match as
// closely as one FFN column allows.
//   DIR/configs/{baseline,gated-sdpa}.json   DIR/runs/{baseline,gated-sdpa}/
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "demo/preset.h"
#include "model/config.h"

namespace gatedlm::demo {

struct ModelPair {
  model::ModelConfig baseline, gated;
  int64_t baseline_params = 0, gated_params = 0, gate_params = 0;
};

ModelPair make_models(const Preset& preset, int64_t vocab);
// "baseline 6,918,144 parameters (ffn_hidden 704); gated ... difference +1,536 (+0.022%)".
std::string describe_models(const ModelPair& models);

struct RunInfo {
  std::string name, label, dir, config_path;
  model::ModelConfig config;
  std::string key;  // the run's inputs (data, model, planned training config)
  bool diverged = false;
};

// Baseline first. Writes each model config to DIR/configs/NAME.json (unless it holds it already).
std::vector<RunInfo> make_runs(const std::filesystem::path& out, const ModelPair& models);

}  // namespace gatedlm::demo
