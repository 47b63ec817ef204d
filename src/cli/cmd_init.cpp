// gatedlm init: a freshly initialised checkpoint.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "model/init.h"

namespace gatedlm::cli {

void register_init(CLI::App& app) {
  struct Options {
    std::string config, out;
    uint64_t seed = 1234;
    bool force = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "init", "Write a freshly initialised checkpoint (config.json + model.safetensors) to a directory.");
  sub->add_option("--config", opt->config, "model config JSON")->required()->check(CLI::ExistingFile);
  sub->add_option("--out", opt->out, "checkpoint directory to create")->required();
  sub->add_option("--seed", opt->seed, "initialisation seed")->capture_default_str();
  sub->add_flag("--force", opt->force, "overwrite an existing checkpoint in --out");
  sub->callback([opt] {
    const model::ModelConfig c = model::load_config(opt->config);
    namespace fs = std::filesystem;
    if (!opt->force && fs::exists(fs::path(opt->out) / "model.safetensors"))
      fail(opt->out, ": already holds a checkpoint (pass --force to overwrite it)");
    std::vector<float> params;
    const model::ParamLayout layout(c);
    model::init_params(params, layout, c, opt->seed);
    io::save_checkpoint(opt->out, c, params);
    std::printf("wrote %s (%lld parameters, seed %llu)\n", opt->out.c_str(), static_cast<long long>(layout.total()),
                static_cast<unsigned long long>(opt->seed));
  });
}

}  // namespace gatedlm::cli
