#pragma once
// The fixed partition of a float matrix product into tiles of C, so that its bits do not
// depend on the thread count.
//
// oneDNN splits a product's work among the threads it runs on, and for some shapes it
// splits the K sum too (the weight gradient dW = dY^T X, K = the tokens, on few output
// rows; on AVX2 machines already at 2 threads): then each C element is the sum of
// per-thread partial sums, and its last bits change with the thread count. So matmul()
// cuts C into tiles whose sizes depend on the shape only and runs each tile as a
// one-thread oneDNN product over the whole K (one thread never splits K): every C
// element is then one dot product computed the same way whatever the thread count, and
// the threads share the tiles.
#include <algorithm>
#include <cstdint>

namespace gatedlm::kernels {

struct ProductTiles {
  int64_t tile_rows = 0, tile_cols = 0;  // the last row / column of tiles may be narrower
  int64_t row_tiles = 1, col_tiles = 1;
  int64_t tiles() const { return row_tiles * col_tiles; }
};

// About a third of a millisecond of one core's work per tile (multiply-adds), so that a
// tile's fixed costs (a primitive call, packing its operands) stay small. Measured on two
// Zen 4 cores (bench/RESULTS.md, "Thread-count-independent numbers"): with these two
// constants a training step costs the same CPU time as with oneDNN's own split; with
// 2^23 and 64 it cost 3-4 % more.
inline constexpr int64_t kProductTileWork = int64_t{1} << 24;
// Up to this many tiles per product (all items of a batched product together): enough
// for the threads of a large machine, few enough that each tile's operand packing stays cheap.
inline constexpr int64_t kProductMaxTiles = 32;
// Tiles are at least this wide in each dimension that is split, and multiples of it.
inline constexpr int64_t kProductTileGranule = 32;

// The tiles of C [M, N] for a product with K-long dot products, repeated `items` times
// (a batched product: each item is cut alike). Depends on its arguments only.
inline ProductTiles plan_product_tiles(int64_t M, int64_t N, int64_t K, int64_t items = 1) {
  ProductTiles t{M, N, 1, 1};
  if (M <= 0 || N <= 0 || K <= 0 || items <= 0) return t;
  const double work = static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K) *
                      static_cast<double>(items);
  const int64_t wanted_total = std::clamp<int64_t>(static_cast<int64_t>(work / kProductTileWork), 1, kProductMaxTiles);
  const int64_t wanted = (wanted_total + items - 1) / items;  // per item
  const auto granules = [](int64_t n) { return (n + kProductTileGranule - 1) / kProductTileGranule; };
  const int64_t gm = granules(M), gn = granules(N);
  // Split the longer side of the tile until there are enough tiles: square tiles pack the
  // least operand data for their work.
  int64_t pm = 1, pn = 1;
  while (pm * pn < wanted) {
    const int64_t tm = (gm + pm - 1) / pm, tn = (gn + pn - 1) / pn;
    if (tm <= 1 && tn <= 1) break;
    if (tm >= tn) ++pm;
    else ++pn;
  }
  t.tile_rows = std::min(M, (gm + pm - 1) / pm * kProductTileGranule);
  t.tile_cols = std::min(N, (gn + pn - 1) / pn * kProductTileGranule);
  t.row_tiles = (M + t.tile_rows - 1) / t.tile_rows;
  t.col_tiles = (N + t.tile_cols - 1) / t.tile_cols;
  return t;
}

}  // namespace gatedlm::kernels
