// The tiled layout of quant_tiles.h: byte moves, set-independent (arranging happens once,
// when a model is attached; reading rows back serves the paths that do not read tiles).
#include "kernels/quant_tiles.h"

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "core/error.h"
#include "kernels/element_types.h"
#include "kernels/kernel_set.h"

namespace gatedlm::kernels {
namespace {

// A field of a block (its scale, its values, ...): `units` runs of `unit_bytes` bytes at
// `block_offset` in the block. A tile holds its blocks in groups (TileGeometry::group_blocks
// of them, fewer in the last), group g at g * group_blocks * span (span: the 16 rows' bytes
// of one block). In a group of n blocks, unit u of row i's block j (j < n) sits at
// region_base + n * after_values + j * region_stride + (u * 16 + i) * unit_bytes from the
// group's start (all 16 rows' unit u side by side), each byte XORed with `bias`.
struct TileField {
  int64_t block_offset, units, unit_bytes, region_base, region_stride, after_values = 0;
  uint8_t bias = 0;
};
// Values per block of a tiled row: the format's blocks, and for BF16 (no blocks) 32 values.
int64_t tile_block_values(ElementType format) {
  return format == ElementType::bf16 ? kQuantBlockValues : element_traits(format).block_values;
}

// The fields of a format's blocks and where quant_tiles.h puts them in a tile.
struct TileGeometry {
  int64_t count;        // blocks a row
  int64_t row_bytes;    // bytes of a row of blocks
  int64_t block_bytes;  // 18 (Q4_0), 34 (Q8_0), 144 (Q4_K), 176 (Q5_K), 210 (Q6_K), 136 (IQ4_XS), 64 (BF16)
  int64_t group_blocks = 1;  // blocks a group (TileField): kQuantTilePairBlocks for Q4_0 / Q8_0, else 1
  std::vector<TileField> fields;
  TileGeometry(ElementType format, int64_t cols)
      : count(cols / tile_block_values(format)),
        row_bytes(element_row_bytes(format, cols)),
        block_bytes(row_bytes / count) {
    const int64_t rows = kQuantTileRows;
    // The K-quants and BF16, block by block: each field of the block (its offset, its units and
    // their bytes), in the block's own order, with the 16 rows' units side by side, so a field
    // at block offset f starts at 16 f in the tile's block.
    struct Field {
      int64_t block_offset, units, unit_bytes;
    };
    const auto side_by_side = [&](std::initializer_list<Field> block) {
      for (const Field& f : block)
        fields.push_back({f.block_offset, f.units, f.unit_bytes, rows * f.block_offset, 0});
    };
    switch (format) {
      case ElementType::bf16:  // 16 4-byte groups of 2 values
        side_by_side({{0, 16, 4}});
        return;
      // d, dmin (fp16), the 3 words of packed scales, (Q5_K: the 8 4-byte groups of fifth bits,)
      // the 32 4-byte groups of nibbles.
      case ElementType::q4_k: side_by_side({{0, 1, 2}, {2, 1, 2}, {4, 3, 4}, {16, 32, 4}});
        return;
      case ElementType::q5_k: side_by_side({{0, 1, 2}, {2, 1, 2}, {4, 3, 4}, {16, 8, 4}, {48, 32, 4}});
        return;
      // The 32 4-byte groups of ql, the 16 of qh, the 4 of scales, d: the 3072 bytes of values
      // whole lines from the tile's start, the 288 of scales after them.
      case ElementType::q6_k: side_by_side({{0, 32, 4}, {128, 16, 4}, {192, 4, 4}, {208, 1, 2}});
        return;
      // d, scales_h, scales_l, the 32 4-byte groups of indices.
      case ElementType::iq4_xs: side_by_side({{0, 1, 2}, {2, 1, 2}, {4, 1, 4}, {8, 32, 4}});
        return;
      default: break;
    }
    // Q4_0 / Q8_0, blocks in pairs (an odd last block alone): the pair's values, then its
    // blocks' fp16 scales (quant_tiled_block).
    const int64_t dwords = format == ElementType::q4_0 ? 4 : 8, values = dwords * 4 * rows;
    const uint8_t bias = format == ElementType::q8_0 ? 0x80 : 0;
    group_blocks = kQuantTilePairBlocks;
    fields = {{2, dwords, 4, 0, values, 0, bias}, {0, 1, 2, 0, 2 * rows, values}};
  }
  // Where unit u of row `row`'s block b sits in the tile (TileField).
  int64_t tiled_at(const TileField& field, int64_t row, int64_t b, int64_t u) const {
    const int64_t first = b - b % group_blocks, in_group = std::min(group_blocks, count - first);
    return first * kQuantTileRows * block_bytes + field.region_base + in_group * field.after_values +
           (b - first) * field.region_stride + (u * kQuantTileRows + row) * field.unit_bytes;
  }
  // f(block byte offset, tiled byte offset, bytes, bias) for every unit of row `row`'s blocks.
  template <class F>
  void for_each_unit(int64_t row, F&& f) const {
    for (int64_t b = 0; b < count; ++b)
      for (const TileField& field : fields)
        for (int64_t u = 0; u < field.units; ++u)
          f(b * block_bytes + field.block_offset + u * field.unit_bytes, tiled_at(field, row, b, u), field.unit_bytes,
            field.bias);
  }
};

// n bytes from `from` to `to`, each XORed with bias.
void move_unit(uint8_t* to, const uint8_t* from, int64_t n, uint8_t bias) {
  for (int64_t j = 0; j < n; ++j) to[j] = from[j] ^ bias;
}

void check_tiles(ElementType format, int64_t cols) {
  if (!quant_format_tiles(format)) fail("quantised tiles: ", element_name(format), " has no tiled layout");
  const int64_t block = tile_block_values(format);
  if (cols <= 0 || cols % block != 0)
    fail("quantised tiles: ", cols, " columns is not a positive multiple of ", block, " (", element_name(format), ")");
}

// One tile, rows of blocks -> tiles (to_tiles) or back, through a scratch copy.
void rearrange_tile(const TileGeometry& g, uint8_t* tile, bool to_tiles) {
  thread_local std::vector<uint8_t> scratch;
  scratch.assign(tile, tile + kQuantTileRows * g.row_bytes);
  const uint8_t* from = scratch.data();
  for (int64_t i = 0; i < kQuantTileRows; ++i)
    g.for_each_unit(i, [&](int64_t block, int64_t tiled, int64_t n, uint8_t bias) {
      const int64_t row = i * g.row_bytes + block;
      if (to_tiles) move_unit(tile + tiled, from + row, n, bias);
      else move_unit(tile + row, from + tiled, n, bias);
    });
}

void rearrange(ElementType format, void* data, int64_t tiles, int64_t cols, bool to_tiles) {
  check_tiles(format, cols);
  const TileGeometry g(format, cols);
  auto* bytes = static_cast<uint8_t*>(data);
#pragma omp parallel for schedule(static) if (tiles >= 64)
  for (int64_t t = 0; t < tiles; ++t) rearrange_tile(g, bytes + t * kQuantTileRows * g.row_bytes, to_tiles);
}

}  // namespace

bool quant_format_tiles(ElementType format) {
  return format == ElementType::q8_0 || format == ElementType::q4_0 || format == ElementType::q4_k ||
         format == ElementType::q5_k || format == ElementType::q6_k || format == ElementType::iq4_xs ||
         format == ElementType::bf16;
}

int64_t quant_tile_value_bytes(ElementType format) {
  if (!quant_format_tiles(format)) fail("quantised tiles: ", element_name(format), " has no tiled layout");
  if (format == ElementType::q4_k) return kQuantTileRows * 128;
  if (format == ElementType::q5_k) return kQuantTileRows * 160;
  if (format == ElementType::q6_k) return kQuantTileRows * 192;
  if (format == ElementType::iq4_xs) return kQuantTileRows * 128;
  if (format == ElementType::bf16) return kQuantTileRows * 64;
  return kQuantTileRows * (format == ElementType::q4_0 ? 16 : 32);
}

void quant_tile_rows(ElementType format, void* data, int64_t tiles, int64_t cols) {
  // The tile kernels ask far_tile_requests() inside their parallel regions: a bad
  // GATEDLM_FAR_REQUEST is refused here, as the weights are tiled, where an error can leave.
  far_tile_requests();
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
    g.for_each_unit(r % kQuantTileRows, [&](int64_t block, int64_t tiled, int64_t n, uint8_t bias) {
      move_unit(row + block, tile + tiled, n, bias);
    });
  }
}

}  // namespace gatedlm::kernels
