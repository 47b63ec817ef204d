#include "infer/prefix_reuse.h"

#include <algorithm>

namespace gatedlm::infer {

static_assert(kSnapshotInterval % kChunk == 0, "snapshots sit on the delta rule's chunk boundaries");

PrefixReuse::PrefixReuse(Decoder& decoder, int64_t budget_bytes)
    : decoder_(decoder), cache_(budget_bytes, decoder.kv_bytes_per_token(), decoder.recurrent_floats()) {}

int64_t PrefixReuse::limit(int64_t n) const {
  if (!cache_.recurrent() || n < kChunkedFrom) return n - 1;
  return (n - kChunkedFrom) / kChunk * kChunk;
}

int64_t PrefixReuse::restore(int64_t slot, std::span<const int32_t> prompt) {
  decoder_.reset(slot);
  const PrefixCache::Hit hit = cache_.lookup(prompt, limit(static_cast<int64_t>(prompt.size())));
  if (hit.tokens > 0) decoder_.restore(slot, hit.tokens, hit.kv, hit.kv_rows, hit.snapshot);
  return hit.tokens;
}

int64_t PrefixReuse::piece_end(int64_t from, int64_t n) const {
  if (!cache_.recurrent()) return n;
  const int64_t last = limit(n);
  if (n < kChunkedFrom || last <= from) return n;
  return std::min((from / kSnapshotInterval + 1) * kSnapshotInterval, last);
}

void PrefixReuse::fed(int64_t slot, std::span<const int32_t> prompt, int64_t end) {
  const bool point = cache_.recurrent() ? end % kChunk == 0 : end == static_cast<int64_t>(prompt.size());
  const std::span<const int32_t> tokens = prompt.first(static_cast<size_t>(end));
  if (!point || cache_.budget() == 0 || cache_.holds(tokens)) return;
  cache_.insert(tokens, decoder_.save_rows(slot, end),
                cache_.recurrent() ? decoder_.save_recurrent(slot) : std::vector<float>{});
}

}  // namespace gatedlm::infer
