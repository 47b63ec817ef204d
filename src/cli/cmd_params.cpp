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
      "Count parameters: total, embedding (token embedding plus an untied LM head), non-embedding and gate "
      "(and, with switch heads, their routers and experts: all of them and those one token uses).");
  sub->add_option("--config", opt->config, "model config JSON")->required()->check(CLI::ExistingFile);
  sub->add_flag("--json", opt->json, "print JSON {total, embedding, non_embedding, gate, attention_bias, gate_variant} "
                "(plus switch_heads {router, experts, experts_active, active_total, variant} when on)");
  sub->callback([opt] {
    const model::ModelConfig c = model::load_config(opt->config);
    const model::ParamLayout layout(c);
    const int64_t total = layout.total(), embedding = layout.embedding_count(),
                  gate = layout.count(model::ParamKind::gate), bias = layout.count(model::ParamKind::bias);
    // Switch heads: every expert is stored, k of E per head run for a token.
    const model::SwitchHeadsCounts sw = model::switch_heads_counts(c);
    const int64_t active_total = total - (sw.experts - sw.experts_active);
    if (opt->json) {
      nlohmann::json j{{"total", total},
                       {"embedding", embedding},
                       {"non_embedding", total - embedding},
                       {"gate", gate},
                       {"attention_bias", bias},
                       {"gate_variant", model::describe_gate(c)}};
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
