#include "analysis/training_probe.h"

#include "analysis/attention_sink.h"
#include "analysis/gate_stats.h"
#include "analysis/massive_activations.h"

namespace gatedlm::analysis {

using nlohmann::json;

json probe_summary(model::Model<float>& m, const SequenceSet& windows) {
  const model::ModelConfig& c = m.config();
  AttentionSinkOptions sink_options;
  sink_options.map_layers.clear();  // F-Attn and the sink rate only
  AttentionSinkProbe sink(c, sink_options);
  MassiveActivationProbe massive(c);
  GateStatsProbe gates(c);
  const int64_t L = windows.length;
  for (int64_t i = 0; i < windows.count; ++i) {
    m.forward(windows.row(i), nullptr, 1, L);
    sink.observe(m);
    massive.observe(m);
    gates.observe(m);
  }
  const AttentionSinkResult s = sink.result();
  json gate_mean = nullptr;
  if (gates.gated()) gate_mean = gates.result().mean_score();  // as analyze's gates.mean_score
  // The learned sinks' share (null for a model without them).
  const json sink_logit_mass = s.sink_logit_mass_per_head.empty() ? json(nullptr) : json(s.sink_logit_mass);
  return json{{"f_attn", s.f_attn},
              {"sink_rate_percent", s.sink_rate_percent},
              {"sink_logit_mass", sink_logit_mass},
              {"m_act", massive.result().m_act},
              {"gate_mean", gate_mean},
              {"probe_windows", windows.count},
              {"probe_seq_len", windows.length}};
}

train::ProbeFn make_training_probe() {
  struct State {
    std::unique_ptr<model::Model<float>> model;
    SequenceSet windows;
  };
  auto state = std::make_shared<State>();
  return [state](const model::ModelConfig& config, std::span<const float> params, const train::ProbeInput& in) {
    if (!state->model) {
      state->model = std::make_unique<model::Model<float>>(config);
      state->windows = sample_windows(in.val, in.bos_id, in.windows, in.seq_len, 0);
    }
    state->model->load_params(params);
    return probe_summary(*state->model, state->windows);
  };
}

}  // namespace gatedlm::analysis
