#pragma once
// A sweep's description (docs/sweep.md): a base model and training setup, variants that
// patch them, seeds and a token budget. Variants are JSON merge patches (RFC 7386) of the
// base model config and of the training keys; their parameter counts are matched to the
// baseline's by the FFN width, as the paper matched its dense models (Table 2: "we reduce
// the FFN's width so that all methods have the same number of parameters").
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/config.h"
#include "train/train_config.h"

namespace gatedlm::sweep {

// How a variant's parameter count is set.
enum class Match {
  baseline,  // FFN width chosen so the total is the base config's (default)
  none,      // as patched: the parameter-expansion baselines, which add parameters on purpose
  added_by,  // FFN width chosen so the total is the base's plus what `added_by` adds to it
};

struct Variant {
  std::string name;   // [A-Za-z0-9._-]+, the run directory's name
  std::string label;  // the table's row title (default: the name)
  std::string series; // variants of one series are one line in plots against the learning rate
  nlohmann::json model = nlohmann::json::object();  // merge patch of the base model config
  nlohmann::json train = nlohmann::json::object();  // merge patch of the training keys
  Match match = Match::baseline;
  nlohmann::json added_by;  // Match::added_by: a model patch whose added parameters are matched
  std::string compare_to;   // variant the differences are taken to (default: the spec's baseline)
};

struct SweepSpec {
  std::string source;  // the file (or preset) it came from, for messages
  std::string description;
  nlohmann::json base;   // model config; vocab_size may be left to the data
  nlohmann::json train;  // training keys (no budget, schedule cadence or seed: the sweep sets those)
  int64_t tokens = 0;    // training tokens per run
  std::vector<uint64_t> seeds{1, 2, 3};
  double warmup_fraction = 0.1;
  int64_t evals = 2;           // validations per run; the last at the end
  int64_t probe_every = 0;     // train --probe-every for every run (0 = off)
  int64_t probe_windows = 8;
  int64_t final_windows = 16;  // validation windows of the final F-Attn / M-Act / gate probe
  int64_t heldout_tokens = 16384;
  std::string data, heldout;  // optional; the command line may give or override them
  std::string baseline;       // default: the first variant
  std::vector<Variant> variants;
  nlohmann::json raw;  // the spec as read (files of variants inlined), for the record
};

// The most seeds one sweep runs (the spec's "seeds" and --seeds alike).
inline constexpr size_t kMaxSeeds = 1000;
// Refuses, naming `where`, more than kMaxSeeds seeds or a seed listed twice (one pass).
void check_seeds(const std::vector<uint64_t>& seeds, const std::string& where);

// Parses a spec object; `dir` resolves relative paths (variant files, data, heldout).
SweepSpec parse_spec(const nlohmann::json& j, const std::string& source, const std::string& dir);
// NAME.json under configs/sweep/ (next to the binary's source tree or the current directory),
// or a file.
SweepSpec load_spec_file(const std::string& path);
std::string find_sweep_preset(const std::string& name);

// A variant made concrete for a vocabulary.
struct PlannedVariant {
  Variant variant;
  model::ModelConfig config;
  int64_t params = 0, gate_params = 0;
  int64_t target_params = 0;  // what the FFN width was matched to (the total, for Match::none)
};

struct Plan {
  int64_t base_params = 0;
  model::ModelConfig base;
  std::vector<PlannedVariant> variants;
  const PlannedVariant& find(const std::string& name) const;
};

// Throws naming the variant whose patch does not give a valid config.
Plan plan_variants(const SweepSpec& spec, int64_t vocab_size);

// The FFN width whose total parameter count is closest to `target` (ties: the smaller
// total); `config` is the JSON of a model config.
int64_t ffn_width_for(const nlohmann::json& config, int64_t target, const std::string& where);

// The training config of one run: the spec's keys with the variant's patch, the budget in
// steps, warmup = warmup_fraction of the steps, evals and probes spread over them.
train::TrainConfig train_config_for(const SweepSpec& spec, const Variant& v, uint64_t seed);

}  // namespace gatedlm::sweep
