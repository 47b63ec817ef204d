#pragma once
// The token windows every probe of analysis/ runs on. Each window is BOS followed by
// length-1 consecutive ids of a token stream (a dataset split, or an encoded text) from an
// offset drawn with gatedlm::Rng; the same stream, seed, count and length give the same
// windows, so different checkpoints are compared on the same sequences.
#include <cstdint>
#include <span>
#include <vector>

namespace gatedlm::analysis {

struct SequenceSet {
  int64_t count = 0, length = 0;
  std::vector<int32_t> tokens;   // [count, length], row-major; tokens[i*length] is BOS
  std::vector<int64_t> offsets;  // [count]: where each window's length-1 ids start in the stream
  const int32_t* row(int64_t i) const { return tokens.data() + i * length; }
  std::vector<std::vector<int32_t>> rows() const;
};

// Windows i = 0..count-1: offset_i = rng.below(stream.size() - (length-1) + 1) with
// rng = Rng(Rng::derive(seed, "analysis.sequences")), window = [bos, stream[offset_i ..
// offset_i + length-2]]. Throws gatedlm::Error when length < 2, count < 1 or the stream
// has fewer than length-1 ids.
SequenceSet sample_windows(std::span<const int32_t> stream, int32_t bos_id, int64_t count, int64_t length,
                           uint64_t seed);

// The windows exactly as given (e.g. from an analysis JSON's token_ids); all rows must
// have the same length >= 2.
SequenceSet sequences_from_rows(const std::vector<std::vector<int32_t>>& rows);

}  // namespace gatedlm::analysis
