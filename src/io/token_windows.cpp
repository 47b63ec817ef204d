#include "io/token_windows.h"

#include "core/error.h"
#include "core/rng.h"

namespace gatedlm::io {

void fill_window(Batch& b, int64_t row, const std::vector<int32_t>& stream, int64_t offset, int32_t bos) {
  int32_t* in = b.inputs.data() + row * b.seq;
  int32_t* tg = b.targets.data() + row * b.seq;
  in[0] = bos;
  for (int64_t t = 0; t < b.seq; ++t) {
    tg[t] = stream[offset + t];
    if (t + 1 < b.seq) in[t + 1] = stream[offset + t];
  }
}

Batch training_batch(const std::vector<int32_t>& stream, int64_t batch, int64_t seq, int32_t bos, uint64_t seed,
                     int64_t step, int64_t micro) {
  const int64_t size = static_cast<int64_t>(stream.size());
  if (size < seq + 1) fail("the training split has ", size, " tokens, fewer than one sequence of ", seq);
  Batch b{batch, seq, std::vector<int32_t>(batch * seq), std::vector<int32_t>(batch * seq)};
  Rng rng(Rng::derive(seed, cat("batch/", step, "/", micro)));
  for (int64_t r = 0; r < batch; ++r)
    fill_window(b, r, stream, static_cast<int64_t>(rng.below(static_cast<uint64_t>(size - seq + 1))), bos);
  return b;
}

std::vector<int64_t> evaluation_offsets(int64_t stream_size, int64_t seq, int64_t max_tokens) {
  std::vector<int64_t> offsets;
  for (int64_t o = 0; o + seq <= stream_size; o += seq) {
    if (max_tokens > 0 && static_cast<int64_t>(offsets.size() + 1) * seq > max_tokens) break;
    offsets.push_back(o);
  }
  return offsets;
}

}  // namespace gatedlm::io
