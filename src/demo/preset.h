#pragma once
// A demo preset (configs/demo/NAME.json): the model, the training hyper-parameters the demo
// does not plan, the time budget and how many evaluations, probes and checkpoints to spread
// over the run. The demo plans the rest (steps, warmup, eval_every, save_every, probe_every).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "demo/synthetic_data.h"

namespace gatedlm::demo {

struct Preset {
  std::string path, name, description, file_sha;
  double minutes = 15;
  int64_t steps = 0;  // > 0: a fixed step count instead of the time budget
  int64_t vocab = 4096;
  double val_fraction = 0.05;
  nlohmann::json model, train;  // model config without vocab_size; train config without the planned keys
  double warmup_fraction = 0.1;
  // Spread over the run: validation evaluations (the last one is the final evaluation),
  // probes of F-Attn, sink rate, M-Act and gate mean (train --probe-every), checkpoints.
  int64_t evals = 16, probes = 16, saves = 4;
  int64_t heldout_tokens = 32768;
  int64_t analyze_sequences = 16, analyze_seq_len = 256;
  bool synthetic = false;  // "data": train on data generated from the corpus (demo/synthetic_data.h)
  SyntheticData data;
};

// The JSON file behind a preset name: NAME itself when it is a file, else
// configs/demo/NAME.json next to the binary's source tree or under the current directory.
std::string find_preset(const std::string& name);

// Reads and checks the preset; every error names the file and the key.
Preset load_preset(const std::string& name);
// The same checks on a preset already parsed (`path` names it in messages).
Preset preset_from_json(const nlohmann::json& j, const std::string& path);

}  // namespace gatedlm::demo
