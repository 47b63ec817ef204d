#pragma once
// Runs every probe of analysis/ over a set of sequences and assembles the analysis JSON
// (schema: docs/analysis.md; metric definitions: the project's metrics.md).
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "analysis/sequences.h"
#include "model/model.h"

namespace gatedlm::analysis {

struct AnalyzeOptions {
  std::vector<int64_t> map_layers;  // empty: the first and the last layer
  int64_t map_size = 64;
  double sink_eps = 0.3;
  bool include_token_ids = true;
  // Copied into the JSON as given.
  std::string checkpoint;
  nlohmann::json source = nullptr;  // where the sequences came from
  uint64_t seed = 0;
};

// phase is "probes" (pass 1) or "gate control" (pass 2, gated models only).
using Progress = std::function<void(const char* phase, int64_t done, int64_t total)>;

nlohmann::json analyze(model::Model<float>& m, const SequenceSet& sequences, const AnalyzeOptions& options,
                       const Progress& progress = {});

// The window length L of `gatedlm analyze` and Model.analyze: `requested` (0 = min(256,
// max_seq_len)), refused naming --seq-len when it exceeds max_seq_len.
int64_t analysis_window_length(int64_t requested, int64_t max_seq_len);

// `gatedlm analyze` over a token stream (a dataset split, an encoded text): `windows`
// windows of `length` tokens (BOS + length-1 ids, sample_windows with options.seed), the
// map layers checked (checked_layer_list), then analyze().
nlohmann::json analyze_stream(model::Model<float>& m, std::span<const int32_t> stream, int32_t bos, int64_t windows,
                              int64_t length, AnalyzeOptions options, const Progress& progress = {});

// The layers of --map-layers (the command line splits "0,3,5"), each checked against
// n_layers, duplicates dropped, in the order given.
std::vector<int64_t> checked_layer_list(const std::vector<int64_t>& layers, int64_t n_layers);

}  // namespace gatedlm::analysis
