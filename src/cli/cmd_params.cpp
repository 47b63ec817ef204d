// gatedlm params: parameter counts of a model config.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "model/config.h"
#include "model/param_layout.h"

namespace gatedlm::cli {

void register_params(CLI::App& app) {
  struct Options {
    std::string config;
    bool json = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "params",
      "Count parameters: total, embedding (token embedding plus an untied LM head), non-embedding and gate; with "
      "a mixture of experts also the parameters active per token and the MoE gates (router and shared-expert "
      "gate).");
  sub->add_option("--config", opt->config, "model config JSON")->required()->check(CLI::ExistingFile);
  sub->add_flag("--json", opt->json,
                "print JSON {total, embedding, non_embedding, gate, attention_bias, gate_variant}, with MoE also "
                "{active_per_token, moe_gate, experts}");
  sub->callback([opt] {
    const model::ModelConfig c = model::load_config(opt->config);
    const model::ParamLayout layout(c);
    const int64_t total = layout.total(), embedding = layout.embedding_count(),
                  gate = layout.count(model::ParamKind::gate), bias = layout.count(model::ParamKind::bias);
    // MoE: a token runs top_k of the n_experts routed experts of each MoE layer.
    const model::MoeConfig& moe = c.moe;
    const int64_t moe_layers = moe.moe_layers(c.n_layers);
    const int64_t experts = moe_layers * moe.n_experts * moe.expert_params(c.d_model);
    const int64_t active = total - moe_layers * (moe.n_experts - moe.top_k) * moe.expert_params(c.d_model);
    const int64_t moe_gate = moe_layers * moe.gate_params(c.d_model);
    if (opt->json) {
      nlohmann::json j{{"total", total},
                       {"embedding", embedding},
                       {"non_embedding", total - embedding},
                       {"gate", gate},
                       {"attention_bias", bias},
                       {"gate_variant", model::describe_gate(c)}};
      if (c.has_moe()) {
        j["active_per_token"] = active;
        j["moe_gate"] = moe_gate;
        j["experts"] = experts;
      }
      std::printf("%s\n", j.dump(2).c_str());
      return;
    }
    auto row = [](const char* label, int64_t n) {
      std::printf("%-15s %14lld  (%.3f M)\n", label, static_cast<long long>(n), static_cast<double>(n) / 1e6);
    };
    row("total", total);
    row("embedding", embedding);
    row("non-embedding", total - embedding);
    row("gate", gate);
    if (bias) row("attention bias", bias);
    if (c.has_moe()) {
      row("active/token", active);
      row("MoE gate", moe_gate);
      row("routed experts", experts);
    }
    std::printf("%-15s %s\n", "gate variant", model::describe_gate(c).c_str());
  });
}

}  // namespace gatedlm::cli
