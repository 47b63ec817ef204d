#include "analysis/sequences.h"

#include "core/error.h"
#include "core/rng.h"

namespace gatedlm::analysis {

std::vector<std::vector<int32_t>> SequenceSet::rows() const {
  std::vector<std::vector<int32_t>> out;
  out.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) out.emplace_back(row(i), row(i) + length);
  return out;
}

SequenceSet sample_windows(std::span<const int32_t> stream, int32_t bos_id, int64_t count, int64_t length,
                           uint64_t seed) {
  if (length < 2) fail("sequence length must be at least 2 (BOS and one token), got ", length);
  if (count < 1) fail("the number of sequences must be at least 1, got ", count);
  if (bos_id < 0) fail("the tokenizer has no BOS id (", bos_id, "); analysis windows start with BOS");
  const int64_t body = length - 1, available = static_cast<int64_t>(stream.size());
  if (available < body)
    fail("the token stream has ", available, " ids, fewer than the ", body, " a window of length ", length,
         " needs; use more text or a smaller --seq-len");
  Rng rng(Rng::derive(seed, "analysis.sequences"));
  SequenceSet s;
  s.count = count;
  s.length = length;
  s.tokens.resize(static_cast<size_t>(count * length));
  s.offsets.resize(static_cast<size_t>(count));
  const uint64_t choices = static_cast<uint64_t>(available - body + 1);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t offset = static_cast<int64_t>(rng.below(choices));
    s.offsets[i] = offset;
    int32_t* row = s.tokens.data() + i * length;
    row[0] = bos_id;
    for (int64_t t = 0; t < body; ++t) row[t + 1] = stream[offset + t];
  }
  return s;
}

SequenceSet sequences_from_rows(const std::vector<std::vector<int32_t>>& rows) {
  if (rows.empty()) fail("no sequences given");
  SequenceSet s;
  s.count = static_cast<int64_t>(rows.size());
  s.length = static_cast<int64_t>(rows[0].size());
  if (s.length < 2) fail("sequence length must be at least 2, got ", s.length);
  for (size_t i = 0; i < rows.size(); ++i) {
    if (static_cast<int64_t>(rows[i].size()) != s.length)
      fail("sequence ", i, " has ", rows[i].size(), " tokens, sequence 0 has ", s.length,
           "; all sequences must have the same length");
    s.tokens.insert(s.tokens.end(), rows[i].begin(), rows[i].end());
  }
  s.offsets.assign(rows.size(), -1);
  return s;
}

}  // namespace gatedlm::analysis
