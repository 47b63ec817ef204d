#pragma once
// Cutting a token stream into windows: training and evaluation batches (io/, since both
// train/ and eval/ read them). Every sequence starts with BOS: inputs are [BOS, s[o], ..., s[o+L-2]] and targets [s[o], ..., s[o+L-1]], so each
// window predicts L stream tokens, the first of them from BOS alone.
#include <cstdint>
#include <vector>

namespace gatedlm::io {

struct Batch {
  int64_t batch = 0, seq = 0;
  std::vector<int32_t> inputs, targets;  // [batch, seq]
};

// Fills one window at stream offset o (o + L <= stream size).
void fill_window(Batch& b, int64_t row, const std::vector<int32_t>& stream, int64_t offset, int32_t bos);

// Training batch `micro` of step `step`: offsets drawn uniformly from a stream seeded by
// (seed, step, micro), so the data order is a pure function of the step and a resumed run
// sees exactly the batches an uninterrupted one would.
Batch training_batch(const std::vector<int32_t>& stream, int64_t batch, int64_t seq, int32_t bos, uint64_t seed,
                     int64_t step, int64_t micro);

// Non-overlapping evaluation windows covering the stream from its start: window k starts
// at offset k*L. At most max_tokens predicted tokens (0 = all whole windows).
std::vector<int64_t> evaluation_offsets(int64_t stream_size, int64_t seq, int64_t max_tokens);

}  // namespace gatedlm::io
