// gatedlm data synth: a dataset of synthetic examples: passkey / needle-in-a-haystack
// retrieval, optionally mixed with text (docs/longctx.md), or Bigram-Backcopy chains
// (eval/synth_bigram_backcopy.h), the task in which small models grow an attention sink.
// Registered under `gatedlm data`.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/commands.h"
#include "core/error.h"
#include "eval/synth.h"
#include "eval/synth_bigram_backcopy.h"

namespace gatedlm::cli {
namespace {

struct SynthArgs {
  eval::SynthOptions retrieval;
  eval::BigramBackcopyOptions bigram;
  std::vector<CLI::Option*> retrieval_only, bigram_only;
  CLI::Option *seq_len = nullptr, *val_fraction = nullptr;
};

void run_retrieval(const eval::SynthOptions& o) {
  if (o.shape.multikey_distractors < 0) fail("--distractors must not be negative");
  if (o.shape.multivalue_values < 1) fail("--values must be at least 1");
  const eval::SynthSummary s = eval::synthesize_dataset(o);
  std::printf("%s: %lld synthetic examples (%lld tokens) in train", o.out.c_str(),
              static_cast<long long>(s.train_examples), static_cast<long long>(s.synthetic_tokens));
  if (s.text_tokens > 0)
    std::printf(" with %lld text tokens (synthetic share %.3f)", static_cast<long long>(s.text_tokens),
                static_cast<double>(s.synthetic_tokens) / static_cast<double>(s.synthetic_tokens + s.text_tokens));
  if (s.val_examples > 0) std::printf("; %lld examples in val", static_cast<long long>(s.val_examples));
  std::printf("\n");
}

void run_bigram_backcopy(SynthArgs& a) {
  eval::BigramBackcopyOptions& o = a.bigram;
  // The options both tasks share are read into the retrieval struct; copy what was given.
  o.tokenizer = a.retrieval.tokenizer;
  o.out = a.retrieval.out;
  o.count = a.retrieval.count;
  o.seed = a.retrieval.seed;
  o.force = a.retrieval.force;
  if (a.seq_len->count() > 0) o.seq_len = a.retrieval.seq_len;
  if (a.val_fraction->count() > 0) o.val_fraction = a.retrieval.val_fraction;
  const eval::BigramBackcopySummary s = eval::synthesize_bigram_backcopy(o);
  std::string triggers;
  for (int32_t t : s.triggers) triggers += (triggers.empty() ? "" : ",") + std::to_string(t);
  std::printf("%s: bigram-backcopy over %lld symbols, triggers %s (%.1f%% of positions); train %lld documents "
              "(%lld tokens), val %lld documents (%lld tokens)\n",
              o.out.c_str(), static_cast<long long>(s.symbols), triggers.c_str(), 100.0 * s.trigger_share,
              static_cast<long long>(s.train_documents), static_cast<long long>(s.train_tokens),
              static_cast<long long>(s.val_documents), static_cast<long long>(s.val_tokens));
}

}  // namespace

void register_data_synth(CLI::App& app) {
  CLI::App* data = app.get_subcommand("data");  // created by register_data
  auto a = std::make_shared<SynthArgs>();
  eval::SynthOptions& opt = a->retrieval;
  eval::BigramBackcopyOptions& bb = a->bigram;
  CLI::App* sub = data->add_subcommand(
      "synth",
      "Write a dataset directory (as `data prepare` does) of synthetic examples: retrieval (passkey, or "
      "RULER-style needles: single, multi-key, multi-value in turn), optionally mixed with text at a set ratio, "
      "ending with their answer; or bigram-backcopy: chains that follow a bigram model estimated from --corpus, "
      "except that after a trigger (one of the most frequent symbols) the next symbol copies the one before it "
      "(Guo et al. 2024), each document BOS + chain.");
  sub->add_option("--task", opt.task,
                  "passkey, niah (single, multi-key, multi-value in turn), all (the four) or bigram-backcopy")
      ->required();
  sub->add_option("--tokenizer", opt.tokenizer, "a SentencePiece .model file, or \"byte\"")->required();
  sub->add_option("--out", opt.out, "the dataset directory to write")->required();
  sub->add_option("--count", opt.count,
                  "examples (default 1000 without --mix-text); bigram-backcopy: training documents (or --tokens)");
  a->seq_len = sub->add_option("--seq-len", opt.seq_len,
                               "the longest example in tokens, BOS included (default 256); bigram-backcopy: "
                               "tokens per document, BOS included (default 4096)");
  a->retrieval_only.push_back(sub->add_option("--min-len", opt.min_len, "the shortest example (default seq-len/4)"));
  a->retrieval_only.push_back(
      sub->add_option("--mix-text", opt.mix_text, "text file or directory to mix with (its tail is the validation split)"));
  a->retrieval_only.push_back(sub->add_option(
      "--ratio", opt.ratio, "with --mix-text: share of the training tokens that are synthetic, in (0, 1)"));
  a->val_fraction = sub->add_option("--val-fraction", opt.val_fraction,
                                    "fraction of the text held out, in [0, 1) (default 0.1); bigram-backcopy: "
                                    "validation documents per training document (default 0.05, at least one)");
  a->retrieval_only.push_back(
      sub->add_option("--filler", opt.filler, "filler text file (default: the neutral block)")->check(CLI::ExistingFile));
  a->retrieval_only.push_back(sub->add_option("--distractors", opt.shape.multikey_distractors,
                                              "niah multi-key: needles with other keys")
                                  ->capture_default_str());
  a->retrieval_only.push_back(
      sub->add_option("--values", opt.shape.multivalue_values, "niah multi-value: values per key")->capture_default_str());
  a->bigram_only.push_back(sub->add_option("--corpus", bb.corpus,
                                           "bigram-backcopy: text files or directories the bigram model is "
                                           "estimated from (tokenised with --tokenizer)")
                               ->expected(1, -1));
  a->bigram_only.push_back(sub->add_option("--triggers", bb.triggers,
                                           "bigram-backcopy: the K most frequent symbols are the triggers")
                               ->capture_default_str());
  a->bigram_only.push_back(
      sub->add_option("--trigger-ids", bb.trigger_ids, "bigram-backcopy: these token ids are the triggers instead")
          ->delimiter(',')
          ->expected(1, -1));
  a->bigram_only.push_back(sub->add_option(
      "--tokens", bb.tokens, "bigram-backcopy: training tokens, in whole documents (default 1000000 without --count)"));
  sub->add_option("--seed", opt.seed, "seed of the examples (streams distinct from longctx's)")->capture_default_str();
  sub->add_flag("--force", opt.force, "replace a dataset already in --out");
  sub->callback([a] {
    const bool bigram = a->retrieval.task == "bigram-backcopy";
    for (CLI::Option* o : bigram ? a->retrieval_only : a->bigram_only)
      if (o->count() > 0)
        fail(o->get_name(), " does not apply to --task ", a->retrieval.task,
             bigram ? " (it is an option of the retrieval tasks)" : " (it is an option of --task bigram-backcopy)");
    if (bigram) {
      if (!a->bigram.trigger_ids.empty() && a->bigram_only[1]->count() > 0)
        fail("give --triggers K or --trigger-ids LIST, not both");
      run_bigram_backcopy(*a);
    } else {
      run_retrieval(a->retrieval);
    }
  });
}

}  // namespace gatedlm::cli
