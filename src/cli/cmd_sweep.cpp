// gatedlm sweep: variants x seeds at one token budget, with paired statistics.
#include <CLI/CLI.hpp>
#include <string>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "core/error.h"
#include "sweep/spec.h"
#include "sweep/sweep.h"

namespace gatedlm::cli {

namespace {

// "3" = seeds 1..3; "1,5,9" = those seeds.
// --seeds (CLI11 splits the list): one value N is a count (seeds 1..N), several a list.
std::vector<uint64_t> seeds_from_option(const std::vector<uint64_t>& given) {
  if (given.size() != 1) {
    sweep::check_seeds(given, "--seeds");
    return given;
  }
  const uint64_t n = given[0];
  if (n < 1 || n > sweep::kMaxSeeds)
    fail("--seeds ", n, ": a count must be in 1..", sweep::kMaxSeeds, " (or give a list: 1,2,3)");
  std::vector<uint64_t> out;
  for (uint64_t seed = 1; seed <= n; ++seed) out.push_back(seed);
  return out;
}

}  // namespace

void register_sweep(CLI::App& app) {
  struct Options {
    sweep::SweepOptions sweep;
    std::vector<uint64_t> seeds;
    bool no_report = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "sweep",
      "Train variants x seeds at one token budget, one run after another: the same data order (per seed) and "
      "schedule for every variant, parameter counts matched by the FFN width (every count printed), then per "
      "variant mean +- std over seeds of validation loss / PPL / bits per byte, held-out bits per byte, F-Attn, "
      "sink rate, M-Act, gate score and loss spikes, and the difference to the baseline paired by seed with a 95 % "
      "t confidence interval: DIR/sweep.md, DIR/sweep.json, DIR/report/index.html. Resumable: the same command "
      "reuses finished runs and continues an interrupted one. Spec format and presets (table1, lr-stability): "
      "docs/sweep.md.");
  sub->add_option("--spec", opt->sweep.spec, "sweep spec JSON (docs/sweep.md)")->check(CLI::ExistingFile);
  sub->add_option("--preset", opt->sweep.preset,
                  "table1 (the paper's Table 1 rows in miniature) | lr-stability (12 layers, baseline vs G1 at 1x-8x "
                  "a base learning rate), or a name in configs/sweep/");
  sub->add_option("--out", opt->sweep.out, "output directory")->required();
  sub->add_option("--data", opt->sweep.data,
                  "dataset directory from `gatedlm data prepare` (overrides the spec's \"data\"; presets need it)");
  sub->add_option("--heldout", opt->sweep.heldout,
                  "held-out text file for a second bits-per-byte column (overrides the spec's; none = skip)");
  sub->add_option("--tokens", opt->sweep.tokens, "training tokens per run (overrides the spec's \"tokens\")")
      ->check(CLI::PositiveNumber);
  sub->add_option("--seeds", opt->seeds, "seeds: a count N (seeds 1..N) or a list 1,2,3 (overrides the spec's)")
      ->delimiter(',');
  sub->add_option("--only", opt->sweep.only,
                  "comma-separated variants to run (their baselines are added); the tables cover those")
      ->delimiter(',');
  sub->add_flag("--plan", opt->sweep.plan_only, "print the variants and their parameter counts, write DIR/plan.json, train nothing");
  sub->add_flag("--no-report", opt->no_report, "skip the HTML report (needs gnuplot)");
  sub->callback([opt, sub] {
    sweep::SweepOptions o = opt->sweep;
    if (!opt->seeds.empty()) o.seeds = seeds_from_option(opt->seeds);
    o.report = !opt->no_report;
    o.command_line = command_line_of(*sub, "sweep");
    if (sweep::run_sweep(o) == sweep::SweepOutcome::interrupted) throw CLI::RuntimeError(130);
  });
}

}  // namespace gatedlm::cli
