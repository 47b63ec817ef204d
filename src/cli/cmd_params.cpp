// gatedlm params: parameter counts of a model config.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "model/config.h"
#include "model/param_layout.h"
#include "model/switch_heads.h"

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
      "a mixture of experts or switch heads also the parameters one token uses (all stored experts count in the "
      "total, only the chosen ones in the active count), the MoE gates (router and shared-expert gate) and the "
      "switch-head routers and experts.");
  sub->add_option("--config", opt->config, "model config JSON")->required()->check(CLI::ExistingFile);
  sub->add_flag("--json", opt->json,
                "print JSON {total, embedding, non_embedding, gate, attention_bias, gate_variant}, with MoE also "
                "{active_per_token, moe_gate, experts}, with switch heads also switch_heads {router, experts, "
                "experts_active, active_total, variant}");
  sub->callback([opt] {
    const model::ModelConfig c = model::load_config(opt->config);
    const model::ParamLayout layout(c);
    const int64_t total = layout.total(), embedding = layout.embedding_count(),
                  gate = layout.count(model::ParamKind::gate), bias = layout.count(model::ParamKind::bias);
    // Every expert is stored; a token runs top_k of the n_experts routed experts of each MoE
    // layer, and k of E switch-head experts per head.
    const model::MoeConfig& moe = c.moe;
    const int64_t moe_layers = moe.moe_layers(c.n_layers);
    const int64_t experts = moe_layers * moe.n_experts * moe.expert_params(c.d_model);
    const int64_t moe_idle = moe_layers * (moe.n_experts - moe.top_k) * moe.expert_params(c.d_model);
    const int64_t moe_gate = moe_layers * moe.gate_params(c.d_model);
    const model::SwitchHeadsCounts sw = model::switch_heads_counts(c);
    const int64_t active = total - moe_idle - (sw.experts - sw.experts_active);
    const int64_t active_total = active;
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
      if (c.switch_heads.on())
        j["switch_heads"] = nlohmann::json{{"router", sw.router},
                                           {"experts", sw.experts},
                                           {"experts_active", sw.experts_active},
                                           {"active_total", active_total},
                                           {"variant", model::describe_switch_heads(c)}};
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
    if (c.switch_heads.on()) {
      row("switch router", sw.router);
      row("switch experts", sw.experts);
      row("experts active", sw.experts_active);
      row("active total", active_total);
      std::printf("%-15s %s\n", "switch heads", model::describe_switch_heads(c).c_str());
    }
  });
}

}  // namespace gatedlm::cli
