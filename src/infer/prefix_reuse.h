#pragma once
// The scheduler's use of the prefix cache (prefix_cache.h) for its decoder: restores the
// longest cached prefix of a new prompt into its slot, cuts the rest of the prompt into
// pieces (one decoder step each) that end where the state is saved, and saves it there.
//
// The tokens are those of a server without the cache, bit for bit, because every row gets
// the bits it gets when the whole prompt runs in one step:
// - attention: a chunk that continues a slot runs the fused kernel as the whole prompt would
//   (decoder.h); the products and norms act on each row alone, as continuous batching
//   already requires;
// - Gated DeltaNet: a run of kChunkedFrom (16) tokens or more takes the chunked delta rule
//   in chunks of kChunk (64) counted from the run's start, a shorter run the recurrence
//   token by token (model/gated_deltanet_parts.h), and the two differ in the last bits. So a
//   hybrid restores only positions p that are multiples of 64 and at least 16 tokens before
//   the prompt's end (or any p when the prompt has fewer than 16): the rest then runs in the
//   very chunks of the one-step prompt. Its snapshots are taken at such positions: every
//   kSnapshotInterval tokens and at the last multiple of 64 that is 16 or more tokens before
//   the prompt's end, not at the end itself (a snapshot there would be restorable only by a
//   prompt that continues it by a multiple of 64 tokens).
// - A model without recurrent layers restores any prefix but the prompt's last token (whose
//   logits the first sample needs) and saves its rows at the prompt's end.
#include <cstdint>
#include <span>

#include "infer/decoder.h"
#include "infer/prefix_cache.h"
#include "model/deltanet_chunks.h"

namespace gatedlm::infer {

// The delta rule's chunk and the run length from which it is chunked (model/deltanet_chunks.h).
inline constexpr int64_t kChunk = model::kDeltaRuleChunk;
inline constexpr int64_t kChunkedFrom = model::kDeltaRuleChunkedFrom;

// A hybrid's prompt is cut at every multiple of this many tokens besides its last restorable
// point: snapshots for requests that share a long start (a system prompt, a document) but not
// the latest turn. A multiple of the delta rule's chunk (64).
inline constexpr int64_t kSnapshotInterval = 1024;

class PrefixReuse {
 public:
  PrefixReuse(Decoder& decoder, int64_t budget_bytes);

  // Starts the slot with the longest cached prefix of prompt (empty when none); returns its
  // length.
  int64_t restore(int64_t slot, std::span<const int32_t> prompt);
  // Where the prompt's next piece, starting at token `from`, ends.
  int64_t piece_end(int64_t from, int64_t prompt_tokens) const;
  // After the step that fed the slot prompt[..end): saves the state if end is a point a
  // later prompt may restore.
  void fed(int64_t slot, std::span<const int32_t> prompt, int64_t end);
  const PrefixCache& cache() const { return cache_; }

 private:
  // The furthest point a prompt of n tokens may be restored to.
  int64_t limit(int64_t n) const;

  Decoder& decoder_;
  PrefixCache cache_;
};

}  // namespace gatedlm::infer
