// gatedlm data synth: a dataset of synthetic passkey / needle-in-a-haystack examples,
// optionally mixed with text (docs/longctx.md). Registered under `gatedlm data`.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/commands.h"
#include "core/error.h"
#include "eval/synth.h"

namespace gatedlm::cli {

void register_data_synth(CLI::App& app) {
  CLI::App* data = app.get_subcommand("data");  // created by register_data
  auto opt = std::make_shared<eval::SynthOptions>();
  CLI::App* sub = data->add_subcommand(
      "synth",
      "Write a dataset directory (as `data prepare` does) of synthetic retrieval examples: passkey, or RULER-style "
      "needles (single, multi-key, multi-value in turn), optionally mixed with text at a set ratio. Examples end "
      "with their answer; filler is the neutral passkey block or --filler text.");
  sub->add_option("--task", opt->task, "passkey, niah (single, multi-key, multi-value in turn) or all (the four)")
      ->required();
  sub->add_option("--tokenizer", opt->tokenizer, "a SentencePiece .model file, or \"byte\"")->required();
  sub->add_option("--out", opt->out, "the dataset directory to write")->required();
  sub->add_option("--count", opt->count, "examples (default 1000 without --mix-text)");
  sub->add_option("--seq-len", opt->seq_len, "the longest example in tokens (BOS included)")->capture_default_str();
  sub->add_option("--min-len", opt->min_len, "the shortest example (default seq-len/4)");
  sub->add_option("--mix-text", opt->mix_text, "text file or directory to mix with (its tail is the validation split)");
  sub->add_option("--ratio", opt->ratio, "with --mix-text: share of the training tokens that are synthetic, in (0, 1)");
  sub->add_option("--val-fraction", opt->val_fraction, "fraction of the text held out, in [0, 1)")
      ->capture_default_str();
  sub->add_option("--filler", opt->filler, "filler text file (default: the neutral block)")->check(CLI::ExistingFile);
  sub->add_option("--distractors", opt->shape.multikey_distractors, "niah multi-key: needles with other keys")
      ->capture_default_str();
  sub->add_option("--values", opt->shape.multivalue_values, "niah multi-value: values per key")->capture_default_str();
  sub->add_option("--seed", opt->seed, "seed of the examples (streams distinct from longctx's)")->capture_default_str();
  sub->add_flag("--force", opt->force, "replace a dataset already in --out");
  sub->callback([opt] {
    if (opt->shape.multikey_distractors < 0) fail("--distractors must not be negative");
    if (opt->shape.multivalue_values < 1) fail("--values must be at least 1");
    const eval::SynthSummary s = eval::synthesize_dataset(*opt);
    std::printf("%s: %lld synthetic examples (%lld tokens) in train", opt->out.c_str(),
                static_cast<long long>(s.train_examples), static_cast<long long>(s.synthetic_tokens));
    if (s.text_tokens > 0)
      std::printf(" with %lld text tokens (synthetic share %.3f)", static_cast<long long>(s.text_tokens),
                  static_cast<double>(s.synthetic_tokens) / static_cast<double>(s.synthetic_tokens + s.text_tokens));
    if (s.val_examples > 0) std::printf("; %lld examples in val", static_cast<long long>(s.val_examples));
    std::printf("\n");
  });
}

}  // namespace gatedlm::cli
