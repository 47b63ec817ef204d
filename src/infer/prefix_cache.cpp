#include "infer/prefix_cache.h"

#include <algorithm>

#include "core/error.h"

namespace gatedlm::infer {

namespace {

// Tokens a and b share from the start.
int64_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  const auto mismatch = std::mismatch(a.begin(), a.begin() + std::min(a.size(), b.size()), b.begin());
  return static_cast<int64_t>(mismatch.first - a.begin());
}

bool starts_with(std::span<const int32_t> text, std::span<const int32_t> prefix) {
  return prefix.size() <= text.size() && std::equal(prefix.begin(), prefix.end(), text.begin());
}

}  // namespace

PrefixCache::PrefixCache(int64_t budget_bytes, int64_t kv_bytes_per_token, int64_t snapshot_floats)
    : budget_(budget_bytes), kv_bytes_per_token_(kv_bytes_per_token), snapshot_floats_(snapshot_floats) {
  if (budget_bytes < 0) fail("--prefix-cache-bytes must not be negative, got ", budget_bytes);
}

// The deepest position of e that `prompt` may restore: any shared token for KV rows alone,
// the last snapshot at or before it for a hybrid.
int64_t PrefixCache::restorable(const Entry& e, std::span<const int32_t> prompt, int64_t limit) const {
  const int64_t shared = std::min(common_prefix(e.tokens, prompt), limit);
  if (!recurrent()) return std::max<int64_t>(shared, 0);
  auto it = e.snapshots.upper_bound(shared);
  return it == e.snapshots.begin() ? 0 : std::prev(it)->first;
}

PrefixCache::Hit PrefixCache::lookup(std::span<const int32_t> prompt, int64_t limit) {
  Entries::iterator best = lru_.end();
  int64_t best_tokens = 0;
  for (auto it = lru_.begin(); it != lru_.end(); ++it) {
    const int64_t p = restorable(*it, prompt, limit);
    if (p > best_tokens) best = it, best_tokens = p;
  }
  if (best == lru_.end()) return {};
  lru_.splice(lru_.begin(), lru_, best);  // now the most recently used
  const Entry& e = lru_.front();
  return {best_tokens, e.kv.data(), static_cast<int64_t>(e.tokens.size()),
          recurrent() ? e.snapshots.at(best_tokens).data() : nullptr};
}

bool PrefixCache::holds(std::span<const int32_t> tokens) const {
  for (const Entry& e : lru_)
    if (starts_with(e.tokens, tokens) && (!recurrent() || e.snapshots.count(static_cast<int64_t>(tokens.size()))))
      return true;
  return false;
}

void PrefixCache::insert(std::span<const int32_t> tokens, std::vector<std::byte> kv, std::vector<float> snapshot) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (static_cast<int64_t>(kv.size()) != n * kv_bytes_per_token_ ||
      static_cast<int64_t>(snapshot.size()) != (recurrent() ? snapshot_floats_ : 0))
    fail("prefix cache: a state of the wrong size for ", n, " tokens");
  const int64_t own_bytes = static_cast<int64_t>(kv.size() + sizeof(float) * snapshot.size() + sizeof(int32_t) * n);
  if (n == 0 || own_bytes > budget_) return;  // too large to keep: the other entries stay
  // An entry that already holds these tokens keeps them: only the snapshot is new.
  for (auto it = lru_.begin(); it != lru_.end(); ++it)
    if (starts_with(it->tokens, tokens)) {
      if (recurrent()) it->snapshots.emplace(n, std::move(snapshot));
      lru_.splice(lru_.begin(), lru_, it);
      account(lru_.front());
      return evict_to_budget();
    }
  Entry e{std::vector<int32_t>(tokens.begin(), tokens.end()), std::move(kv), {}, 0};
  if (recurrent()) e.snapshots.emplace(n, std::move(snapshot));
  // Older entries that are prefixes of this one: their rows are in it, their snapshots move.
  for (auto it = lru_.begin(); it != lru_.end();)
    if (starts_with(tokens, it->tokens)) {
      e.snapshots.merge(it->snapshots);
      bytes_ -= it->bytes;
      it = lru_.erase(it);
    } else {
      ++it;
    }
  lru_.push_front(std::move(e));
  account(lru_.front());
  evict_to_budget();
}

// Sets e.bytes to what e holds now (tokens, rows, snapshots) and the total with it.
void PrefixCache::account(Entry& e) {
  int64_t snapshot_floats = 0;
  for (const auto& [pos, s] : e.snapshots) snapshot_floats += static_cast<int64_t>(s.size());
  const int64_t now = static_cast<int64_t>(e.kv.size()) + static_cast<int64_t>(sizeof(float)) * snapshot_floats +
                      static_cast<int64_t>(sizeof(int32_t)) * static_cast<int64_t>(e.tokens.size());
  bytes_ += now - e.bytes;
  e.bytes = now;
}

// Drops least recently used entries until the total fits the budget.
void PrefixCache::evict_to_budget() {
  while (bytes_ > budget_ && !lru_.empty()) {
    bytes_ -= lru_.back().bytes;
    lru_.pop_back();
  }
}

}  // namespace gatedlm::infer
