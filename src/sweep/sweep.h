#pragma once
// `gatedlm sweep`: variants x seeds at one token budget, one run after another, each with
// the whole machine; the same data order (the seed's) and the same schedule for every
// variant; parameter counts matched by the FFN width (sweep/spec.h). Resumable: a finished
// run is reused, an interrupted one continues, a changed variant starts again.
//
// Output directory DIR:
//   DIR/plan.json                    every variant's config, parameter counts and training config
//   DIR/configs/VARIANT.json         the model configs
//   DIR/runs/VARIANT/seed-S/         run directories (+ result.json: the run's measurements)
//   DIR/runs/VARIANT/seed-S.key      what the run was started with (a different key: started again)
//   DIR/sweep.json, DIR/sweep.md     the tables (mean +- std over seeds, paired differences)
//   DIR/report/index.html            gatedlm report of the sweep (tables, figures, curves)
#include <cstdint>
#include <string>
#include <vector>

namespace gatedlm::sweep {

struct SweepOptions {
  std::string spec;    // a spec file, or
  std::string preset;  // a name in configs/sweep/
  std::string out;
  std::string data;     // overrides the spec's
  std::string heldout;  // overrides the spec's; "none" = skip
  int64_t tokens = 0;   // overrides the spec's budget (tokens per run)
  std::vector<uint64_t> seeds;     // overrides the spec's
  std::vector<std::string> only;   // run only these variants (and the baselines they compare to)
  bool plan_only = false;          // print the plan (parameter counts), train nothing
  bool report = true;
  std::string command_line;
};

enum class SweepOutcome { completed, interrupted, planned };

SweepOutcome run_sweep(const SweepOptions& options);

}  // namespace gatedlm::sweep
