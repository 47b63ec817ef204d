#pragma once
// Sums over many rows whose bits do not depend on the thread count.
//
// A sum over rows split "one slice per thread" (partial sums per thread, then added) gives
// last bits that change with the thread count. Here the rows are cut into chunks whose
// boundaries depend on the row count only; the threads share the chunks, each chunk sums
// its rows in row order into its own partial, and the partials are added in chunk order:
// the same additions in the same order whatever the number of threads.
#include <algorithm>
#include <cstdint>

namespace gatedlm::kernels {

struct RowChunks {
  int64_t rows = 0, size = 1, count = 0;
  int64_t begin(int64_t chunk) const { return chunk * size; }
  int64_t end(int64_t chunk) const { return std::min(rows, (chunk + 1) * size); }
};

// Chunks of at least min_rows rows (so a chunk's partial is worth its memory), at most
// max_chunks of them (so the partials stay small next to the rows).
inline RowChunks fixed_row_chunks(int64_t rows, int64_t min_rows = 64, int64_t max_chunks = 256) {
  RowChunks c;
  c.rows = std::max<int64_t>(rows, 0);
  c.size = std::max(min_rows, (c.rows + max_chunks - 1) / max_chunks);
  c.count = (c.rows + c.size - 1) / c.size;
  return c;
}

// out[j] += partials[0][j] + partials[1][j] + ... (left to right, in Acc), for j < width;
// partials holds `count` rows of `width`. Columns are independent, so they may run in parallel.
template <typename T, typename Acc>
void add_partials_in_order(T* out, const Acc* partials, int64_t count, int64_t width) {
#pragma omp parallel for schedule(static) if (count * width > (int64_t{1} << 16))
  for (int64_t j = 0; j < width; ++j) {
    Acc sum = 0;
    for (int64_t c = 0; c < count; ++c) sum += partials[c * width + j];
    out[j] += static_cast<T>(sum);
  }
}

}  // namespace gatedlm::kernels
