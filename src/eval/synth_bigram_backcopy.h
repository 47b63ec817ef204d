#pragma once
// The Bigram-Backcopy task of Guo et al. 2024 ("Active-Dormant Attention Heads"), the
// setting in which small models grow an attention sink on the first token (metrics.md,
// "Bigram-Backcopy"):
//   - symbols: the token ids a corpus uses (with the project's tokenizer, or bytes);
//   - a bigram model estimated from the corpus: P(next | current) and the marginal P(s);
//   - triggers: the K most frequent symbols (K = 3 by default), or ids given;
//   - a chain: a first symbol drawn from the marginal without the triggers, then each next
//     symbol drawn from the bigram row of the current one, except that after a trigger the
//     next symbol copies the symbol before the trigger.
// Because the first symbol is no trigger, every trigger follows a non-trigger and no copy
// is a trigger (a copy is the symbol a trigger was drawn from), so the rule never loops.
//
// `gatedlm data synth --task bigram-backcopy` writes such chains as a dataset directory
// (docs/data-format.md): documents of --seq-len tokens, each BOS + chain (+ EOS, as every
// document is stored). The trainer and `analyze` take windows at random offsets and put
// BOS at position 0 of every window, so with documents longer than the training window
// each window is BOS + a stretch of one chain.
#include <cstdint>
#include <string>
#include <vector>

#include "core/rng.h"

namespace gatedlm::eval {

// Bigram statistics of a corpus over the ids it uses.
class BigramModel {
 public:
  // Counts every pair of consecutive ids inside each document (none across documents).
  // Throws when the documents hold fewer than 2 distinct ids or no pair at all.
  static BigramModel estimate(const std::vector<std::vector<int32_t>>& documents);

  const std::vector<int32_t>& symbols() const { return symbols_; }  // ascending ids
  int64_t count(int32_t id) const;                                  // occurrences (0 if unused)
  int64_t pair_count(int32_t from, int32_t to) const;
  int64_t row_total(int32_t from) const;  // pairs that start with `from`
  // The `k` most frequent symbols, most frequent first (ties: the smaller id first).
  std::vector<int32_t> most_frequent(int64_t k) const;

  // A draw from the bigram row of `from`; a symbol with no successor in the corpus (it
  // only ended documents) draws from the marginal instead.
  int32_t next(int32_t from, Rng& rng) const;
  // A draw from the marginal without the ids in `excluded` (sorted ascending).
  int32_t first(const std::vector<int32_t>& excluded, Rng& rng) const;

 private:
  int64_t index_of(int32_t id) const;  // position in symbols_, or -1
  int32_t draw_marginal(const std::vector<int32_t>& excluded, Rng& rng) const;

  std::vector<int32_t> symbols_;
  std::vector<int64_t> counts_;  // per symbol
  // Sparse rows: row r (symbol symbols_[r]) holds successors row_next_[row_begin_[r] ..
  // row_begin_[r+1]) in ascending order with their cumulative pair counts row_cum_.
  std::vector<int64_t> row_begin_;
  std::vector<int32_t> row_next_;
  std::vector<int64_t> row_cum_;
};

// A chain of n symbols (no BOS) following the task's rule.
std::vector<int32_t> bigram_backcopy_chain(const BigramModel& bigram, const std::vector<int32_t>& triggers, int64_t n,
                                           Rng& rng);

struct BigramBackcopyOptions {
  std::vector<std::string> corpus;   // text files or directories the bigram model comes from
  std::string tokenizer = "byte";    // "byte" or a SentencePiece .model
  std::string out;                   // the dataset directory to write
  int64_t triggers = 3;              // the K most frequent symbols are the triggers ...
  std::vector<int32_t> trigger_ids;  // ... unless ids are given here
  int64_t seq_len = 4096;            // tokens per document, BOS included (EOS is stored after)
  int64_t count = 0;                 // training documents; 0 = from `tokens`
  int64_t tokens = 0;                // training tokens (rounded up to whole documents); 0 with count 0 = 1M
  double val_fraction = 0.05;        // validation documents, as a share of the training ones (at least 1)
  uint64_t seed = 7;
  bool force = false;
};

struct BigramBackcopySummary {
  int64_t symbols = 0, train_documents = 0, val_documents = 0, train_tokens = 0, val_tokens = 0;
  std::vector<int32_t> triggers;
  double trigger_share = 0;  // share of training chain positions that hold a trigger
};

// Reads and tokenises the corpus, estimates the bigram model, picks the triggers and writes
// the dataset (manifest key "synthetic" records all of it). Throws naming the bad option.
BigramBackcopySummary synthesize_bigram_backcopy(const BigramBackcopyOptions& options);

}  // namespace gatedlm::eval
