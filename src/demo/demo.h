#pragma once
// `gatedlm demo`: the paper's central comparison in miniature, end to end. A baseline and
// a G1 (SDPA-output, elementwise, sigmoid) gated model with the same parameter count are
// trained with the same seed, data order and token budget on real text (recording the
// validation loss and probes of the attention sink and massive activations as they train),
// evaluated on its validation split and on a held-out domain, analysed (attention sink,
// massive activations, gate sparsity), and compared in a Table-4-style table and an HTML
// report. The stages live in their own files: preset, text_sources, prepare, models,
// plan (pure: the budget and segment plan) and plan_stage, segments, final_eval, results.
//
// Output directory DIR:
//   DIR/plan.json                    the preset, the budget, the step count chosen and its re-plans
//   DIR/tokenizer.model              SentencePiece BPE trained on the corpus
//   DIR/data/                        token shards (gatedlm data prepare format)
//   DIR/configs/{baseline,gated-sdpa}.json   the two model configs
//   DIR/runs/{baseline,gated-sdpa}/  run directories (+ analysis.json, heldout.json)
//   DIR/report/index.html            gatedlm report of both runs
//   DIR/results.md, DIR/results.json the table
// Every stage is reused when its inputs are unchanged (a finished run: summary.json says
// completed and the configs match; an interrupted one resumes) unless fresh is set.
#include "demo/demo_options.h"

namespace gatedlm::demo {

enum class DemoOutcome { completed, interrupted };

// Throws gatedlm::Error with an actionable message.
DemoOutcome run_demo(const DemoOptions& options);

}  // namespace gatedlm::demo
