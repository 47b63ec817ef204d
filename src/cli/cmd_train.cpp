// gatedlm train: train a model on a prepared dataset, or resume a run.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "analysis/training_probe.h"
#include "cli/commands.h"
#include "core/error.h"
#include "dist/communicator.h"
#include "train/data_parallel.h"
#include "core/json_file.h"
#include "train/trainer.h"

namespace gatedlm::cli {

namespace {

std::string flag_name(const char* key) {
  std::string s = "--";
  for (const char* p = key; *p; ++p) s += *p == '_' ? '-' : *p;
  return s;
}

}  // namespace

void register_train(CLI::App& app) {
  struct Options {
    train::TrainRequest request;
    std::string train_config;
    train::TrainConfig flags;  // values as given on the command line
    std::string resume_run;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "train",
      "Train a model: AdamW, linear warmup then cosine decay, gradient clipping, periodic validation and atomic "
      "checkpoints in RUN/. Ctrl-C saves a checkpoint and stops; --resume RUN continues bit for bit. Under "
      "`mpirun -np N` it trains data-parallel: --grad-accum micro-batches per rank, the same result as one "
      "process with N times as many (docs/scaling.md).");
  sub->add_option("--config", opt->request.model_config, "model config JSON (new runs)");
  sub->add_option("--data", opt->request.data, "dataset directory from `gatedlm data prepare`");
  sub->add_option("--out", opt->request.out, "run directory to create");
  sub->add_option("--resume", opt->resume_run, "continue the run in this directory from its latest checkpoint");
  sub->add_option("--init-from", opt->request.init_from,
                  "start from this checkpoint's weights (e.g. continued training at a new length or RoPE base)");
  sub->add_option("--train-config", opt->train_config, "training-config JSON (its keys are the flag names with _)")
      ->check(CLI::ExistingFile);
  train::for_each_train_field(opt->flags, [&](const char* key, auto& field, const char* help) {
    sub->add_option(flag_name(key), field, help)->capture_default_str()->group("Hyper-parameters");
  });
  sub->callback([opt, sub] {
    train::TrainRequest req = opt->request;
    if (!opt->resume_run.empty()) {
      if (!req.out.empty() && req.out != opt->resume_run)
        fail("train: give either --out (a new run) or --resume RUN, not both");
      req.out = opt->resume_run;
      req.resume = true;
    } else if (req.out.empty()) {
      fail("train: --out RUN is required (or --resume RUN)");
    }
    // File first, then every flag given explicitly on top of it.
    nlohmann::json merged = nlohmann::json::object();
    if (!opt->train_config.empty()) {
      merged = read_json_file(opt->train_config, "training config");
      train::train_config_from_json(merged, opt->train_config);  // reject unknown keys early
    }
    const nlohmann::json flag_values = train::train_config_to_json(opt->flags);
    train::for_each_train_field(opt->flags, [&](const char* key, auto&, const char*) {
      if (sub->get_option(flag_name(key))->count() > 0) {
        merged[key] = flag_values[key];
        req.explicit_flags.push_back(key);
      } else if (merged.contains(key)) {
        req.explicit_flags.push_back(key);
      }
    });
    req.config = train::train_config_from_json(merged, opt->train_config.empty() ? "flags" : opt->train_config);
    req.probe = analysis::make_training_probe();  // used when probe_every > 0 (--probe-every)
    // Under an MPI launcher: one rank of a data-parallel run (MPI is finalised when comm goes).
    std::unique_ptr<dist::Communicator> comm = dist::from_environment();
    req.comm = comm.get();
    train::TrainOutcome outcome;
    try {
      outcome = train::run_training(req);
    } catch (const train::SharedFailure& e) {
      if (comm->size() == 1) throw;
      // Rank 0 reports it, and the others leave only after it has: mpirun ends the whole
      // job when the first rank exits with an error, which could cut rank 0 off mid-report.
      if (comm->rank() == 0) {
        std::fprintf(stderr, "gatedlm: error: %s\n", e.what());
        std::fflush(stderr);
      }
      comm->barrier();
      throw CLI::RuntimeError(1);
    } catch (const std::exception& e) {
      // Only this rank may have failed: the others would wait for it, so stop them all.
      if (comm->size() > 1) comm->abort(cat("gatedlm: error on rank ", comm->rank(), ": ", e.what()), 1);
      throw;
    }
    if (outcome == train::TrainOutcome::interrupted) throw CLI::RuntimeError(130);
  });
}

}  // namespace gatedlm::cli
