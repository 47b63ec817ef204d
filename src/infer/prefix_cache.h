#pragma once
// The prefix cache of serve (issue 40): a request whose prompt starts like an earlier one's
// (a chat that resends its growing history) restores the decode state of that prefix instead
// of recomputing it. This file holds the data: token sequences with the KV rows of their
// softmax layers and, for hybrid models, snapshots of the recurrent state (Gated DeltaNet
// state and convolution tail) at some of their positions, under a byte budget with LRU
// eviction. The decoder copies rows and snapshots in and out (decoder.h), prefix_reuse.h
// decides where snapshots are taken and which positions may be restored.
//
// KV rows can be cut anywhere, a recurrent state cannot: a model without recurrent layers
// may restore any prefix of an entry, a hybrid only the positions of its snapshots. An
// entry whose tokens extend an older entry's takes over its snapshots and replaces it (its
// rows include the older rows), so a conversation costs one entry.
//
// Lookups copy out at once (the scheduler's worker is the only user): nothing a running
// sequence reads lives in the cache, so eviction never frees state under a sequence.
#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <span>
#include <vector>

namespace gatedlm::infer {

class PrefixCache {
 public:
  // kv_bytes_per_token: K and V bytes of one token over all cached layers, as the decoder's
  // cache stores them (f32 or F16); snapshot_floats: one recurrent snapshot (0: a model
  // without recurrent layers).
  PrefixCache(int64_t budget_bytes, int64_t kv_bytes_per_token, int64_t snapshot_floats);

  struct Hit {
    int64_t tokens = 0;               // the restorable prefix (0: none)
    const std::byte* kv = nullptr;    // [layers, 2, kv_rows, row width]: rows [0, tokens) are the prefix's
    int64_t kv_rows = 0;
    const float* snapshot = nullptr;  // the recurrent state after `tokens` (null: no recurrent layers)
  };
  // The longest restorable prefix of `prompt` of at most `limit` tokens. The pointers stay
  // valid until the next insert.
  Hit lookup(std::span<const int32_t> prompt, int64_t limit);
  // The state after `tokens`: kv [layers, 2, tokens.size(), row width] and, for a hybrid, its
  // recurrent snapshot. Evicts the least recently used entries to stay within the budget;
  // a state larger than the whole budget is not kept (and evicts nothing).
  void insert(std::span<const int32_t> tokens, std::vector<std::byte> kv, std::vector<float> snapshot);

  // Whether an entry already restores all of `tokens` (a hybrid: with a snapshot there), so
  // that saving them again would add nothing.
  bool holds(std::span<const int32_t> tokens) const;

  int64_t bytes() const { return bytes_; }
  int64_t budget() const { return budget_; }
  int64_t entries() const { return static_cast<int64_t>(lru_.size()); }
  bool recurrent() const { return snapshot_floats_ > 0; }

 private:
  struct Entry {
    std::vector<int32_t> tokens;
    std::vector<std::byte> kv;
    std::map<int64_t, std::vector<float>> snapshots;  // position -> recurrent state there
    int64_t bytes = 0;
  };
  using Entries = std::list<Entry>;  // most recently used first
  int64_t restorable(const Entry& e, std::span<const int32_t> prompt, int64_t limit) const;
  void account(Entry& e);
  void evict_to_budget();

  int64_t budget_, kv_bytes_per_token_, snapshot_floats_;
  int64_t bytes_ = 0;
  Entries lru_;
};

}  // namespace gatedlm::infer
