#pragma once
// Q8_0 / Q4_0 / Q4_K / Q5_K / Q6_K / IQ4_XS weight rows arranged in tiles of 16 rows, the
// layout the AVX-512 VNNI kernels read (quant_int8_kernels.inc, rows_times_tiled), and for
// Q8_0, Q4_0, Q4_K and Q5_K the vpmaddubsw ones (tiled_madd, quant_kint8.cpp's tiled_rows; two
// 256-bit halves of 8 rows), for Q4_K, Q5_K, Q6_K and IQ4_XS the vpdpbusd ones of either
// VNNI (quant_kint8_vnni.inc): one weight row per 32-bit lane,
// so a block's 4-byte groups of all 16 rows are one 64-byte load instead of 16 loads and a
// transpose, and the tiles follow each other as one stream (prefetched a tile ahead).
//
// Tile t holds rows [16t, 16t + 16) in exactly the bytes those rows take as rows of blocks
// (16 * quant_row_bytes), so a row that starts a tile has the same byte offset in either
// layout. Within a tile of `count` blocks a row (k = 32 * count), Q4_0 and Q8_0 keep their
// blocks in pairs (b = 2p, 2p + 1; an odd last block alone), pair p at 2p * (V + 32) (V the
// bytes of a block's values), so one thread reads its tile as one stream, values and scales
// together (their scales after all the values were a second stream, which read at 0.87-0.9x
// the speed of one on Zen 3: bench/RESULTS.md, "Q4_0 / Q8_0 tiles: scales beside their
// values"). A pair of n blocks holds:
//   values  n groups, one per block, of `dwords` x 64 bytes (V): 64-byte vector s holds
//           bytes 4s..4s+3 of qs of rows 0..15 (row i in bytes 4i..4i+3); Q4_0 4 vectors
//           (the 16 bytes of nibbles), Q8_0 8 vectors stored as qs ^ 0x80 (q + 128: the
//           unsigned operand of vpdpbusd).
//   scales  then n groups of 16 fp16 scales (32 bytes): d of row i's j-th block at entry
//           16j + i. A whole pair is 576 bytes (Q4_0) or 1088 (Q8_0): whole 64-byte lines.
// Q4_K (k = 256 * count): super-block b of the 16 rows at 16 * 144 * b, 2304 bytes:
//   [0, 32) the rows' d (fp16, row i at 2i), [32, 64) their dmin, [64, 256) the 12 bytes of
//   packed scales and minimums as 3 vectors of 64 bytes (vector w: bytes 4w..4w+3 of row i
//   at 4i), [256, 2304) the 128 bytes of nibbles as 32 vectors (vector s: bytes 4s..4s+3 of
//   row i at 4i), as stored.
// Q5_K: the same, 2816 bytes a super-block, with the 32 bytes of fifth bits as 8 vectors at
//   [256, 768) before the nibbles at [768, 2816).
// Q6_K (read by the vpdpbusd kernels only; k = 256 * count): super-block b at 16 * 210 * b,
//   3360 bytes: [0, 2048) ql's 128 bytes as 32 vectors, [2048, 3072) qh's 64 as 16,
//   [3072, 3328) the 16 int8 scales as 4 vectors, [3328, 3360) the rows' d.
// IQ4_XS (read by the vpdpbusd kernels only; k = 256 * count): super-block b at 16 * 136 * b,
//   2176 bytes: [0, 32) the rows' d, [32, 64) their scales_h (2 bytes, row i at 2i), [64, 128)
//   their scales_l (4 bytes, row i at 4i), [128, 2176) the 128 bytes of indices as 32 vectors.
// BF16 (the fp32_expand kernel of the AVX2 code, quant_decode.cpp; k = 32 * count): block b
//   of 32 values of the 16 rows at 1024 * b, 16 vectors of 64 bytes (vector s: values 2s and
//   2s + 1 of row i at 4i), so one 256-bit load widens to two steps of 8 rows' weights.
// The layout lives in memory only (attached models, model/quantized_weights.h): files and
// GGUF keep rows of blocks.
#include <cstdint>

#include "kernels/quant_weights.h"

namespace gatedlm::kernels {

inline constexpr int64_t kQuantTileRows = 16;

// Whether the format has a tiled layout (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, IQ4_XS, BF16).
bool quant_format_tiles(ElementType format);
// Bytes of one block's values in a tile (all 16 rows): Q4_0 256, Q8_0 512, Q4_K 2048,
// Q5_K 2560 (fifth bits and nibbles), Q6_K 3072 (ql and qh), IQ4_XS 2048 (indices), BF16
// 1024 (32 values).
int64_t quant_tile_value_bytes(ElementType format);

// Blocks a group of a Q4_0 / Q8_0 tile holds: their values, then their scales (above).
constexpr int64_t kQuantTilePairBlocks = 2;

// Block b of a Q4_0 / Q8_0 tile of `count` blocks: where its values start (value_bytes of
// them: quant_tile_value_bytes) and its 16 fp16 scales.
struct QuantTiledBlock {
  const uint8_t* values;
  const uint8_t* scales;
};
inline QuantTiledBlock quant_tiled_block(const uint8_t* tile, int64_t b, int64_t count, int64_t value_bytes) {
  const int64_t first = b - b % kQuantTilePairBlocks, j = b - first;
  const int64_t in_pair = count - first >= kQuantTilePairBlocks ? kQuantTilePairBlocks : count - first;
  const uint8_t* pair = tile + first * (value_bytes + 2 * kQuantTileRows);
  return {pair + j * value_bytes, pair + in_pair * value_bytes + j * 2 * kQuantTileRows};
}

// The first `tiles` tiles of a matrix of rows of blocks (`cols` values a row), in place:
// rows to tiles, and back. Fail naming the format when it has no tiled layout.
void quant_tile_rows(ElementType format, void* data, int64_t tiles, int64_t cols);
void quant_untile_rows(ElementType format, void* data, int64_t tiles, int64_t cols);

// Rows [row0, row0 + rows) of W as rows of blocks (element_row_bytes(W.format, W.cols)
// each) into out, reading the tiles where W has them.
void quant_copy_rows(void* out, const QuantWeights& W, int64_t row0, int64_t rows);

}  // namespace gatedlm::kernels
