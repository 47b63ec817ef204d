// The tiled layout of quant_tiles.h: byte moves, set-independent (arranging happens once,
// when a model is attached; reading rows back serves the paths that do not read tiles).
#include "kernels/quant_tiles.h"

#include <cstring>
#include <vector>

#include "core/error.h"
#include "kernels/quant_blocks.h"

namespace gatedlm::kernels {
namespace {

// Where the bytes of one block of one row sit in a tile: the 2 scale bytes, and the
// value bytes in `dwords` groups of 4 (each XORed with `bias` when stored).
struct TileGeometry {
  int64_t count;       // blocks a row
  int64_t row_bytes;   // bytes of a row of blocks
  int64_t block_bytes; // 18 (Q4_0) or 34 (Q8_0)
  int dwords;          // 4-byte groups of values a block: 4 or 8
  uint8_t bias;        // Q8_0's values are stored + 128
  TileGeometry(ElementType format, int64_t cols)
      : count(cols / kQuantBlockValues),
        row_bytes(element_row_bytes(format, cols)),
        block_bytes(row_bytes / count),
        dwords(format == ElementType::q4_0 ? 4 : 8),
        bias(format == ElementType::q8_0 ? 0x80 : 0) {}
  int64_t scale_at(int64_t row, int64_t b) const { return count * kQuantTileRows * 4 * dwords + (b * kQuantTileRows + row) * 2; }
  int64_t value_at(int64_t row, int64_t b, int s) const { return ((b * dwords + s) * kQuantTileRows + row) * 4; }
};

void check_tiles(ElementType format, int64_t cols) {
  if (!quant_format_tiles(format)) fail("quantised tiles: ", element_name(format), " has no tiled layout");
  if (cols <= 0 || cols % kQuantBlockValues != 0)
    fail("quantised tiles: ", cols, " columns is not a positive multiple of ", kQuantBlockValues);
}

// One tile, rows of blocks -> tiles (to_tiles) or back, through a scratch copy.
void rearrange_tile(const TileGeometry& g, uint8_t* tile, bool to_tiles) {
  thread_local std::vector<uint8_t> scratch;
  scratch.assign(tile, tile + kQuantTileRows * g.row_bytes);
  const uint8_t* from = scratch.data();
  for (int64_t i = 0; i < kQuantTileRows; ++i)
    for (int64_t b = 0; b < g.count; ++b) {
      const int64_t block = i * g.row_bytes + b * g.block_bytes, scale = g.scale_at(i, b);
      std::memcpy(tile + (to_tiles ? scale : block), from + (to_tiles ? block : scale), 2);
      for (int s = 0; s < g.dwords; ++s)
        for (int j = 0; j < 4; ++j) {
          const int64_t value = block + 2 + 4 * s + j, tiled = g.value_at(i, b, s) + j;
          if (to_tiles) tile[tiled] = from[value] ^ g.bias;
          else tile[value] = from[tiled] ^ g.bias;
        }
    }
}

void rearrange(ElementType format, void* data, int64_t tiles, int64_t cols, bool to_tiles) {
  check_tiles(format, cols);
  const TileGeometry g(format, cols);
  auto* bytes = static_cast<uint8_t*>(data);
#pragma omp parallel for schedule(static) if (tiles >= 64)
  for (int64_t t = 0; t < tiles; ++t) rearrange_tile(g, bytes + t * kQuantTileRows * g.row_bytes, to_tiles);
}

}  // namespace

bool quant_format_tiles(ElementType format) { return format == ElementType::q8_0 || format == ElementType::q4_0; }

int64_t quant_tile_value_bytes(ElementType format) {
  if (!quant_format_tiles(format)) fail("quantised tiles: ", element_name(format), " has no tiled layout");
  return kQuantTileRows * (format == ElementType::q4_0 ? 16 : 32);
}

void quant_tile_rows(ElementType format, void* data, int64_t tiles, int64_t cols) {
  rearrange(format, data, tiles, cols, true);
}

void quant_untile_rows(ElementType format, void* data, int64_t tiles, int64_t cols) {
  rearrange(format, data, tiles, cols, false);
}

void quant_copy_rows(void* out, const QuantWeights& W, int64_t row0, int64_t rows) {
  if (row0 < 0 || rows < 0 || row0 + rows > W.rows)
    fail("quant_copy_rows: rows [", row0, ", ", row0 + rows, ") outside the ", W.rows, " rows");
  if (W.tiled_rows < 0 || W.tiled_rows > W.rows || W.tiled_rows % kQuantTileRows != 0)
    fail("quant_copy_rows: ", W.tiled_rows, " tiled rows of ", W.rows, " is not a whole number of tiles");
  const int64_t row_bytes = element_row_bytes(W.format, W.cols);
  const auto* data = static_cast<const uint8_t*>(W.data);
  auto* dst = static_cast<uint8_t*>(out);
  if (W.tiled_rows == 0 || row0 >= W.tiled_rows) {
    std::memcpy(dst, data + row0 * row_bytes, static_cast<size_t>(rows * row_bytes));
    return;
  }
  check_tiles(W.format, W.cols);
  const TileGeometry g(W.format, W.cols);
  for (int64_t r = row0; r < row0 + rows; ++r) {
    uint8_t* row = dst + (r - row0) * row_bytes;
    if (r >= W.tiled_rows) {
      std::memcpy(row, data + r * row_bytes, static_cast<size_t>(row_bytes));
      continue;
    }
    const uint8_t* tile = data + r / kQuantTileRows * kQuantTileRows * row_bytes;
    const int64_t i = r % kQuantTileRows;
    for (int64_t b = 0; b < g.count; ++b) {
      uint8_t* block = row + b * g.block_bytes;
      std::memcpy(block, tile + g.scale_at(i, b), 2);
      for (int s = 0; s < g.dwords; ++s)
        for (int j = 0; j < 4; ++j) block[2 + 4 * s + j] = tile[g.value_at(i, b, s) + j] ^ g.bias;
    }
  }
}

}  // namespace gatedlm::kernels
