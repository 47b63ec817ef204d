#include "analysis/analyze.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>

#include "analysis/attention_sink.h"
#include "analysis/expert_load.h"
#include "analysis/gate_stats.h"
#include "analysis/linear_attention_stats.h"
#include "analysis/massive_activations.h"
#include "core/error.h"
#include "model/config.h"
#include "model/layer_kinds.h"

namespace gatedlm::analysis {

using nlohmann::json;

namespace {

json sparsity_json(const SparsityShares& s) { return json{{"lt_1e-2", s.below[0]}, {"lt_1e-3", s.below[1]}}; }

// Null for a model without learned sink logits.
json sink_logit_mass_json(const AttentionSinkResult& r) {
  if (r.sink_logit_mass_per_head.empty()) return nullptr;
  return json{{"per_head", r.sink_logit_mass_per_head},
              {"per_layer", r.sink_logit_mass_per_layer},
              {"mean", r.sink_logit_mass},
              {"rows", "t>=0"}};
}

json sink_json(const AttentionSinkResult& r) {
  json maps = json::object();
  for (size_t i = 0; i < r.map_layers.size(); ++i) maps[std::to_string(r.map_layers[i])] = r.maps[i];
  return json{
      {"f_attn",
       {{"per_head", r.f_attn_per_head}, {"per_layer", r.f_attn_per_layer}, {"mean", r.f_attn}, {"rows", "t>=1"}}},
      {"f_attn_all_rows",
       {{"per_head", r.f_attn_all_per_head},
        {"per_layer", r.f_attn_all_per_layer},
        {"mean", r.f_attn_all},
        {"rows", "t>=0"}}},
      {"sink_rate", {{"eps", r.eps}, {"token", 0}, {"percent", r.sink_rate_percent}}},
      {"attention_maps", maps},
      {"attention_map_size", r.map_size},
      {"sink_logit_mass", sink_logit_mass_json(r)},
  };
}


json massive_json(const MassiveResult& r) {
  json layers = json::array();
  for (const MassiveLayer& l : r.per_layer)
    layers.push_back({{"top3", l.top3},
                      {"median", l.median},
                      {"massive_count", l.massive_count},
                      {"top1_first_token", l.top1_first_token}});
  return json{{"per_layer", layers},
              {"m_act", r.m_act},
              {"criterion", {{"abs_gt", r.abs_threshold}, {"median_ratio_ge", r.median_ratio}}}};
}

json gates_json(const GateStatsResult& r) {
  if (!r.gated) return nullptr;
  json layers = json::array();
  for (const GateLayer& g : r.gates) {
    json sparsity{{"before", sparsity_json(g.before)}, {"after", sparsity_json(g.after)}};
    sparsity["mean_scaled_control"] = g.has_control ? sparsity_json(g.mean_scaled_control) : json(nullptr);
    layers.push_back({{"mean_score", g.mean_score},
                      {"histogram",
                       {{"range", {0.0, 1.0}},
                        {"bins", kGateHistogramBins},
                        {"share", g.histogram},
                        {"below_range", g.below_range},
                        {"above_range", g.above_range}}},
                      {"sparsity", sparsity},
                      {"mean_abs_y", g.mean_abs_y},
                      {"mean_abs_y_gated", g.mean_abs_y_gated}});
  }
  return json{{"per_layer", layers}, {"mean_score", r.mean_score()}};
}

json sdpa_json(const GateStatsResult& r) {
  json layers = json::array();
  for (const SdpaLayer& s : r.sdpa) layers.push_back({{"mean_abs", s.mean_abs}, {"sparsity", sparsity_json(s.sparsity)}});
  return json{{"per_layer", layers}};
}

}  // namespace

std::vector<int64_t> checked_layer_list(const std::vector<int64_t>& layers, int64_t n_layers) {
  std::vector<int64_t> out;
  for (int64_t v : layers) {
    if (v < 0 || v >= n_layers) fail("--map-layers: layer ", v, " is outside 0..", n_layers - 1);
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  return out;
}

int64_t analysis_window_length(int64_t requested, int64_t max_seq_len) {
  const int64_t len = requested > 0 ? requested : std::min<int64_t>(256, max_seq_len);
  if (len > max_seq_len) fail("--seq-len ", len, " exceeds the model's max_seq_len ", max_seq_len);
  return len;
}

json analyze_stream(model::Model<float>& m, std::span<const int32_t> stream, int32_t bos, int64_t windows,
                    int64_t length, AnalyzeOptions options, const Progress& progress) {
  const SequenceSet seqs = sample_windows(stream, bos, windows, length, options.seed);
  options.map_layers = checked_layer_list(options.map_layers, m.config().n_layers);
  return analyze(m, seqs, options, progress);
}

namespace {

// What analyze() needs before any pass. The sink rate, the gate scores and the maps are
// statistics of softmax attention: a model without it (a hybrid whose full_attention_interval
// exceeds n_layers) has none to report.
void check_analysable(const model::ModelConfig& c, const SequenceSet& seqs) {
  if (seqs.count < 1 || seqs.length < 2) fail("analysis needs at least one sequence of at least 2 tokens");
  if (seqs.length > c.max_seq_len)
    fail("sequence length ", seqs.length, " exceeds the model's max_seq_len ", c.max_seq_len);
  if (model::count_layers(c, &model::LayerCaptures::attention_probs) == 0)
    fail("analysis: the model has no softmax attention layer (all ", c.n_layers, " layers are ",
         model::to_string(c.layer_types.empty() ? model::LayerKind::full_attention : c.layer_types.front()),
         "): the sink, gate and activation statistics need at least one");
}

}  // namespace

json analyze(model::Model<float>& m, const SequenceSet& seqs, const AnalyzeOptions& options,
             const Progress& progress) {
  const model::ModelConfig& c = m.config();
  check_analysable(c, seqs);
  const auto start = std::chrono::steady_clock::now();
  AttentionSinkOptions sink_opt;
  sink_opt.eps = options.sink_eps;
  sink_opt.map_size = options.map_size;
  sink_opt.map_layers = options.map_layers;
  if (sink_opt.map_layers.empty()) {  // the first and the last layer with softmax probabilities
    std::vector<int64_t> softmax;
    for (int64_t l = 0; l < c.n_layers; ++l)
      if (model::layer_spec(c, l).captures.attention_probs) softmax.push_back(l);
    if (!softmax.empty()) sink_opt.map_layers.push_back(softmax.front());
    if (softmax.size() > 1) sink_opt.map_layers.push_back(softmax.back());
  }
  AttentionSinkProbe sink(c, sink_opt);
  MassiveActivationProbe massive(c);
  GateStatsProbe gates(c);
  LinearAttentionProbe linear(c);
  ExpertLoadProbe experts(c);

  const int64_t L = seqs.length;
  std::vector<int32_t> targets(static_cast<size_t>(L));
  double loss_sum = 0;
  auto run = [&](int64_t i) {
    const int32_t* row = seqs.row(i);
    for (int64_t t = 0; t + 1 < L; ++t) targets[t] = row[t + 1];
    targets[L - 1] = -1;
    return m.forward(row, targets.data(), 1, L);
  };
  for (int64_t i = 0; i < seqs.count; ++i) {
    loss_sum += run(i);
    sink.observe(m);
    massive.observe(m);
    gates.observe(m);
    linear.observe(m);
    experts.observe(m);
    if (progress) progress("probes", i + 1, seqs.count);
  }
  if (gates.gated()) {
    gates.begin_control_pass();
    for (int64_t i = 0; i < seqs.count; ++i) {
      run(i);
      gates.observe_control(m);
      if (progress) progress("gate control", i + 1, seqs.count);
    }
  }
  const GateStatsResult gate_result = gates.result();

  json j;
  j["format"] = "gatedlm-analysis";
  j["format_version"] = 1;
  j["checkpoint"] = options.checkpoint;
  j["config"] = model::config_to_json(c);
  j["gate_variant"] = model::describe_gate(c);
  j["source"] = options.source;
  j["sequences"] = seqs.count;
  j["seq_len"] = seqs.length;
  j["seed"] = options.seed;
  j["window_loss"] = loss_sum / static_cast<double>(seqs.count);
  j.update(sink_json(sink.result()));
  j["massive_activations"] = massive_json(massive.result());
  j["gates"] = gates_json(gate_result);
  j["linear_attention"] = linear_attention_json(linear.result());
  j["sdpa_output"] = sdpa_json(gate_result);
  j["experts"] = experts.result();  // null for a dense model
  j["elapsed_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (options.include_token_ids) {
    j["token_ids"] = seqs.rows();
    j["offsets"] = seqs.offsets;
  }
  return j;
}

}  // namespace gatedlm::analysis
