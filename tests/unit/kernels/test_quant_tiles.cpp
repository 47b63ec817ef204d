// The tiled layout of Q8_0 / Q4_0 / Q4_K / Q5_K / Q6_K / IQ4_XS / BF16 weights (quant_tiles.h): the bytes
// land where the header says, rows come back unchanged, and every product path gives the same results on
// tiled weights as on rows of blocks: the paths that read tiles (the AVX-512 VNNI kernels) the
// same bits as their row-block kernels where those take whole tiles too (4-8 rows), within
// the int8 bound of the reference at every m; every other path through its row-major copy
// (the kernels_* entries repeat this suite once per kernel set).
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/kernel_set.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_matmul.h"
#include "kernels/quant_matmul_sets.h"
#include "kernels/quant_tiles.h"
#include "test_util.h"

namespace gatedlm::kernels {
namespace {

using testing::random_vector;

constexpr ElementType kTiledFormats[] = {ElementType::q8_0, ElementType::q4_0,   ElementType::q4_k, ElementType::q5_k,
                                         ElementType::q6_k, ElementType::iq4_xs, ElementType::bf16};

// Values per block of the format (32, or a Q4_K super-block's 256; BF16, which has no
// blocks, is tiled 32 values at a time): the sizes below are counted in these.
int64_t unit(ElementType format) {
  return format == ElementType::bf16 ? 32 : element_traits(format).block_values;
}

// n rows of k values quantised, as rows of blocks.
std::vector<uint8_t> blocks_of(ElementType format, int64_t n, int64_t k, uint64_t seed) {
  const std::vector<float> values = random_vector<float>(n * k, seed, 0.5);
  const int64_t row_bytes = element_row_bytes(format, k);
  std::vector<uint8_t> blocks(static_cast<size_t>(n * row_bytes));
  for (int64_t o = 0; o < n; ++o) element_from_f32(format, blocks.data() + o * row_bytes, values.data() + o * k, k);
  return blocks;
}

TEST(QuantTiles, BytesWhereTheLayoutSays) {
  const int64_t k = 96, count = k / 32, n = 35;  // two tiles and 3 rows of blocks past them
  for (ElementType format : {ElementType::q8_0, ElementType::q4_0}) {
    const std::vector<uint8_t> rows = blocks_of(format, n, k, 3);
    std::vector<uint8_t> tiled = rows;
    quant_tile_rows(format, tiled.data(), 2, k);
    const int64_t row_bytes = element_row_bytes(format, k), block_bytes = row_bytes / count;
    const int64_t values = quant_tile_value_bytes(format), tile_bytes = 16 * row_bytes;
    const int dwords = static_cast<int>(values / 64);
    const uint8_t bias = format == ElementType::q8_0 ? 0x80 : 0;
    for (int64_t t = 0; t < 2; ++t)
      for (int64_t i = 0; i < 16; ++i)
        for (int64_t b = 0; b < count; ++b) {
          const uint8_t* block = rows.data() + (16 * t + i) * row_bytes + b * block_bytes;
          const uint8_t* tile = tiled.data() + t * tile_bytes;
          // Blocks in pairs (the third alone): the pair's values, then its scales.
          const int64_t first = b - b % 2, in_pair = std::min<int64_t>(2, count - first);
          const uint8_t* pair = tile + first * (values + 32);
          const uint8_t* value_at = pair + (b - first) * values;
          const uint8_t* scale_at = pair + in_pair * values + (b - first) * 32;
          ASSERT_EQ(std::memcmp(scale_at + 2 * i, block, 2), 0)
              << element_name(format) << " scale of tile " << t << " row " << i << " block " << b;
          for (int s = 0; s < dwords; ++s)
            for (int j = 0; j < 4; ++j)
              ASSERT_EQ(value_at[64 * s + 4 * i + j], block[2 + 4 * s + j] ^ bias)
                  << element_name(format) << " value byte " << 4 * s + j << " of tile " << t << " row " << i;
          const QuantTiledBlock said = quant_tiled_block(tile, b, count, values);
          EXPECT_EQ(said.values, value_at) << element_name(format) << " block " << b;
          EXPECT_EQ(said.scales, scale_at) << element_name(format) << " block " << b;
        }
    // The rows past the tiles stay as they were; back from tiles, every byte is the row's.
    EXPECT_EQ(std::memcmp(tiled.data() + 32 * row_bytes, rows.data() + 32 * row_bytes, 3 * row_bytes), 0);
    quant_untile_rows(format, tiled.data(), 2, k);
    EXPECT_EQ(tiled, rows) << element_name(format);
  }
}

// BF16: block b (32 values) of a tile at 1024 * b, 16 vectors of 64 bytes, vector s holding
// bytes 4s..4s+3 (values 2s, 2s + 1) of row i at 4i.
TEST(QuantTiles, Bf16BytesWhereTheLayoutSays) {
  const int64_t k = 96, count = 3, n = 35, row_bytes = 2 * k;
  const std::vector<uint8_t> rows = blocks_of(ElementType::bf16, n, k, 3);
  ASSERT_EQ(static_cast<int64_t>(rows.size()), n * row_bytes);
  EXPECT_EQ(quant_tile_value_bytes(ElementType::bf16), 1024);
  std::vector<uint8_t> tiled = rows;
  quant_tile_rows(ElementType::bf16, tiled.data(), 2, k);
  for (int64_t t = 0; t < 2; ++t)
    for (int64_t i = 0; i < 16; ++i)
      for (int64_t b = 0; b < count; ++b)
        for (int64_t s = 0; s < 16; ++s)
          for (int64_t j = 0; j < 4; ++j)
            ASSERT_EQ(tiled[t * 16 * row_bytes + 1024 * b + 64 * s + 4 * i + j], rows[(16 * t + i) * row_bytes + 64 * b + 4 * s + j])
                << "tile " << t << " row " << i << " block " << b << " group " << s << " byte " << j;
  EXPECT_EQ(std::memcmp(tiled.data() + 32 * row_bytes, rows.data() + 32 * row_bytes, 3 * row_bytes), 0);
  quant_untile_rows(ElementType::bf16, tiled.data(), 2, k);
  EXPECT_EQ(tiled, rows);
  EXPECT_THROW(quant_tile_rows(ElementType::bf16, tiled.data(), 1, 48), Error) << "not whole blocks of 32";
}

// The K-quants: super-block b of a tile at 16 * block_bytes * b, its fields one after
// another, each as units of all 16 rows side by side (quant_tiles.h): Q4_K d, dmin, the 3
// words of packed scales, 32 groups of nibbles; Q5_K the same with 8 groups of fifth bits
// before the nibbles; Q6_K 32 groups of ql, 16 of qh, 4 of scales, d.
TEST(QuantTiles, KQuantBytesWhereTheLayoutSays) {
  struct Field {
    const char* name;
    int64_t block_offset, units, unit_bytes, tile_offset;
  };
  const std::pair<ElementType, std::vector<Field>> layouts[] = {
      {ElementType::q4_k, {{"d", 0, 1, 2, 0}, {"dmin", 2, 1, 2, 32}, {"scales", 4, 3, 4, 64}, {"qs", 16, 32, 4, 256}}},
      {ElementType::q5_k,
       {{"d", 0, 1, 2, 0}, {"dmin", 2, 1, 2, 32}, {"scales", 4, 3, 4, 64}, {"qh", 16, 8, 4, 256}, {"qs", 48, 32, 4, 768}}},
      {ElementType::q6_k, {{"ql", 0, 32, 4, 0}, {"qh", 128, 16, 4, 2048}, {"scales", 192, 4, 4, 3072}, {"d", 208, 1, 2, 3328}}},
      {ElementType::iq4_xs,
       {{"d", 0, 1, 2, 0}, {"scales_h", 2, 1, 2, 32}, {"scales_l", 4, 1, 4, 64}, {"qs", 8, 32, 4, 128}}}};
  const int64_t k = 512, count = 2, n = 21;  // one tile and 5 rows of blocks past it
  for (const auto& [format, fields] : layouts) {
    const std::vector<uint8_t> rows = blocks_of(format, n, k, 4);
    std::vector<uint8_t> tiled = rows;
    quant_tile_rows(format, tiled.data(), 1, k);
    const int64_t row_bytes = element_row_bytes(format, k), block_bytes = row_bytes / count;
    int64_t covered = 0;
    for (const Field& f : fields) covered += f.units * f.unit_bytes;
    ASSERT_EQ(covered, block_bytes) << element_name(format) << ": the fields are the whole block";
    int64_t values = 0;  // the value fields (all but d, dmin and the scales), all 16 rows
    for (const Field& f : fields)
      if (f.unit_bytes == 4 && std::string(f.name).rfind("scales", 0) != 0) values += 16 * f.units * f.unit_bytes;
    EXPECT_EQ(quant_tile_value_bytes(format), values) << element_name(format);
    for (int64_t i = 0; i < 16; ++i)
      for (int64_t b = 0; b < count; ++b)
        for (const Field& f : fields)
          for (int64_t u = 0; u < f.units; ++u) {
            const uint8_t* block = rows.data() + i * row_bytes + b * block_bytes + f.block_offset + u * f.unit_bytes;
            const uint8_t* tile = tiled.data() + b * 16 * block_bytes + f.tile_offset + (16 * u + i) * f.unit_bytes;
            ASSERT_EQ(std::memcmp(tile, block, static_cast<size_t>(f.unit_bytes)), 0)
                << element_name(format) << " " << f.name << " unit " << u << " of row " << i << " super-block " << b;
          }
    EXPECT_EQ(std::memcmp(tiled.data() + 16 * row_bytes, rows.data() + 16 * row_bytes, 5 * row_bytes), 0);
    quant_untile_rows(format, tiled.data(), 1, k);
    EXPECT_EQ(tiled, rows) << element_name(format);
    EXPECT_THROW(quant_tile_rows(format, tiled.data(), 1, 128), Error) << "not whole super-blocks";
  }
}

TEST(QuantTiles, CopyRowsReadsTilesAndRows) {
  const int64_t n = 53;
  for (ElementType format : kTiledFormats) {
    const int64_t k = 2 * unit(format);
    const std::vector<uint8_t> rows = blocks_of(format, n, k, 5);
    std::vector<uint8_t> tiled = rows;
    quant_tile_rows(format, tiled.data(), 3, k);
    const QuantWeights W{format, tiled.data(), n, k, 48};
    const int64_t row_bytes = element_row_bytes(format, k);
    for (auto [row0, count] : {std::pair<int64_t, int64_t>{0, n}, {5, 20}, {47, 6}, {48, 5}, {17, 1}}) {
      std::vector<uint8_t> copy(static_cast<size_t>(count * row_bytes));
      quant_copy_rows(copy.data(), W, row0, count);
      EXPECT_EQ(std::memcmp(copy.data(), rows.data() + row0 * row_bytes, copy.size()), 0)
          << element_name(format) << " rows [" << row0 << ", " << row0 + count << ")";
    }
    std::vector<uint8_t> copy(static_cast<size_t>(row_bytes));
    EXPECT_THROW(quant_copy_rows(copy.data(), W, 53, 1), Error);
    EXPECT_THROW(quant_copy_rows(copy.data(), QuantWeights{format, tiled.data(), n, k, 40}, 0, 1), Error);
  }
  std::vector<uint8_t> q3(static_cast<size_t>(16 * element_row_bytes(ElementType::q3_k, 256)));
  EXPECT_THROW(quant_tile_rows(ElementType::q3_k, q3.data(), 1, 256), Error) << "Q3_K has no tiled layout";
}

struct TiledProblem {
  ElementType format;
  int64_t m, n, k, tiled_rows;
  std::vector<float> a;
  std::vector<uint8_t> rows, tiled;  // the same weights as rows of blocks, and with tiles
  QuantWeights row_weights() const { return {format, rows.data(), n, k}; }
  QuantWeights tiled_weights() const { return {format, tiled.data(), n, k, tiled_rows}; }
};

TiledProblem make_tiled_problem(ElementType format, int64_t m, int64_t n, int64_t k, uint64_t seed) {
  TiledProblem p{format, m, n, k, n / 16 * 16, random_vector<float>(m * k, seed, 1.0), blocks_of(format, n, k, seed + 1), {}};
  p.tiled = p.rows;
  quant_tile_rows(format, p.tiled.data(), n / 16, k);
  return p;
}

std::vector<float> product(const TiledProblem& p, QuantPath path, const QuantWeights& W) {
  std::vector<float> C(static_cast<size_t>(p.m * p.n), NAN);
  quant_matmul_path(path, C.data(), p.n, p.a.data(), p.k, p.m, W, false);
  return C;
}

// The int8 bound of test_quant_matmul.cpp (activations rounded to int8 blocks) for out[r, o].
// (K-quants: the activations rounded per super-block of 256, as Q8_K.)
double int8_bound(const TiledProblem& p, const std::vector<float>& w, int64_t r, int64_t o) {
  double magnitude = 0.0, activation_term = 0.0;
  const int64_t block = unit(p.format);
  for (int64_t b = 0; b < p.k; b += block) {
    double amax = 0.0, wsum = 0.0;
    for (int64_t j = b; j < b + block; ++j) {
      magnitude += std::fabs(static_cast<double>(p.a[r * p.k + j]) * w[o * p.k + j]);
      amax = std::max(amax, std::fabs(static_cast<double>(p.a[r * p.k + j])));
      wsum += std::fabs(w[o * p.k + j]);
    }
    activation_term += (amax * (1.0 / 254 + 0x1p-11 + 0x1p-20) + 127 * 0x1p-25) * wsum;
  }
  return activation_term + p.k * 0x1p-24 * magnitude * 1.01 + 1e-30;
}

TEST(QuantTiles, EveryPathReadsTiledWeights) {
  for (ElementType format : kTiledFormats)
    for (QuantPath path : {QuantPath::fp32_expand, QuantPath::int8_madd, QuantPath::int8_vnni, QuantPath::fp32_tiles,
                           QuantPath::int8_vnni_emulated, QuantPath::automatic}) {
      if (!quant_path_runnable(path, format)) continue;
      // n: tiles and rows past them, whole tiles only; k: odd numbers of blocks.
      for (int64_t m : {1, 2, 3, 4, 7, 8, 9, 12, 40, 96})
        for (auto [n, blocks] : {std::pair<int64_t, int64_t>{67, 3}, {32, 17}, {16, 2}}) {
          const int64_t k = blocks * unit(format);
          SCOPED_TRACE(::testing::Message() << quant_path_name(path) << " " << element_name(format) << " in "
                                            << kernel_set_summary() << ": m=" << m << " n=" << n << " k=" << k);
          const TiledProblem p = make_tiled_problem(format, m, n, k, 10 * m + n);
          const QuantPath resolved = path == QuantPath::automatic ? quant_best_path(format, m) : path;
          const bool reads_tiles = quant_path_reads_tiles(resolved, format);
          const std::vector<float> tiled = product(p, path, p.tiled_weights()), rows = product(p, path, p.row_weights());
          // Where both sides take whole tiles of 16 weight rows through the same arithmetic
          // (Q8_0 / Q4_0 on vpdpbusd, groups of 4-8 rows), or where tiles are copied back to
          // rows: the same bits. (The K-quant and vpmaddubsw tile kernels sum each block in
          // one lane, their row kernels across lanes: the same dots, fp32 sums in another order.)
          const bool blocks_of_32 = format == ElementType::q8_0 || format == ElementType::q4_0;
          const bool same_kernels =
              !reads_tiles || (resolved == QuantPath::int8_vnni && blocks_of_32 && (m % 8 == 0 || m % 8 >= 4));
          std::vector<float> w(static_cast<size_t>(n * k));
          for (int64_t o = 0; o < n; ++o)
            element_to_f32(format, w.data() + o * k, p.rows.data() + o * element_row_bytes(format, k), k);
          for (int64_t r = 0; r < m; ++r)
            for (int64_t o = 0; o < n; ++o) {
              if (same_kernels) ASSERT_EQ(tiled[r * n + o], rows[r * n + o]) << "row " << r << " col " << o;
              else ASSERT_NEAR(tiled[r * n + o], rows[r * n + o], 2 * int8_bound(p, w, r, o)) << "row " << r << " col " << o;
            }
        }
    }
}

// The largest integer sums the tile kernels keep in int16: weights at the ends of their
// range (every value +-1 with one of the other sign a block, so the codes sit at 0 and at
// their maximum) against activations all +-1 (int8 127): a kernel that sums more groups in
// int16 than fit wraps around and misses by far more than the bound.
TEST(QuantTiles, ExtremeBlocksDoNotOverflow) {
  for (ElementType format : kTiledFormats)
    for (float sign : {1.0f, -1.0f}) {
      // (8 rows: the passes of 4 rows of the vpmaddubsw tiles too, which hold 4 rows' int16 sums.)
      const int64_t m = 8, n = 32, k = 2 * unit(format);
      TiledProblem p{format, m, n, k, n, std::vector<float>(static_cast<size_t>(m * k)), {}, {}};
      for (int64_t i = 0; i < m * k; ++i) p.a[i] = (i / k == 0 ? 1.0f : -1.0f);
      std::vector<float> values(static_cast<size_t>(n * k));
      for (int64_t i = 0; i < n * k; ++i) values[i] = (i % 32 == 0 ? -sign : sign);
      const int64_t row_bytes = element_row_bytes(format, k);
      p.rows.resize(static_cast<size_t>(n * row_bytes));
      for (int64_t o = 0; o < n; ++o) element_from_f32(format, p.rows.data() + o * row_bytes, values.data() + o * k, k);
      p.tiled = p.rows;
      quant_tile_rows(format, p.tiled.data(), n / 16, k);
      std::vector<float> w(static_cast<size_t>(n * k)), expected(static_cast<size_t>(m * n));
      for (int64_t o = 0; o < n; ++o) element_to_f32(format, w.data() + o * k, p.rows.data() + o * row_bytes, k);
      quant_matmul_reference(expected.data(), p.a.data(), m, p.row_weights());
      const std::vector<float> tiled = product(p, QuantPath::automatic, p.tiled_weights());
      for (int64_t r = 0; r < m; ++r)
        for (int64_t o = 0; o < n; ++o)
          ASSERT_NEAR(tiled[r * n + o], expected[r * n + o], int8_bound(p, w, r, o))
              << element_name(format) << " sign " << sign << " row " << r << " col " << o;
    }
}

// BF16 tiles through the path that reads them (fp32_expand: bf16_tile_rows) against the
// oracle within fp32 sums (the weights are exact): 1-8 rows (both halves of a tile at once up
// to 4, one at a time above), many rows, tiles and rows past them, one and 17 blocks.
TEST(QuantTiles, Bf16TilesMatchTheReference) {
  if (!quant_path_reads_tiles(QuantPath::fp32_expand, ElementType::bf16))
    GTEST_SKIP() << "no BF16 tile kernel in " << kernel_set_summary();
  for (int64_t m : {1, 2, 3, 4, 5, 7, 8, 9, 40})
    for (auto [n, k] : {std::pair<int64_t, int64_t>{67, 96}, {32, 32}, {16, 32 * 17}}) {
      SCOPED_TRACE(::testing::Message() << "m=" << m << " n=" << n << " k=" << k);
      const TiledProblem p = make_tiled_problem(ElementType::bf16, m, n, k, 5 * m + n);
      const std::vector<float> tiled = product(p, QuantPath::fp32_expand, p.tiled_weights());
      std::vector<float> reference(static_cast<size_t>(m * n));
      quant_matmul_reference(reference.data(), p.a.data(), m, p.row_weights());
      std::vector<float> w(static_cast<size_t>(n * k));
      for (int64_t o = 0; o < n; ++o) element_to_f32(ElementType::bf16, w.data() + o * k, p.rows.data() + o * 2 * k, k);
      for (int64_t r = 0; r < m; ++r)
        for (int64_t o = 0; o < n; ++o) {
          double magnitude = 0.0;
          for (int64_t j = 0; j < k; ++j) magnitude += std::fabs(static_cast<double>(p.a[r * k + j]) * w[o * k + j]);
          ASSERT_NEAR(tiled[r * n + o], reference[r * n + o], k * 0x1p-24 * magnitude + 1e-30) << "row " << r << " col " << o;
        }
    }
}

// The vpdpbusd tile kernels of Q4_K / Q5_K / Q6_K / IQ4_XS (quant_kint8_vnni.inc) compute the
// integers of the vpmaddubsw ones. Q4_K and Q5_K scale them by the same fp32 code as their
// vpmaddubsw tile kernel: the same bits, for every count of activation rows (passes of 8, 4, 2
// and 1), tiles and rows past them, long rows, and the extreme blocks of the overflow test.
// IQ4_XS's and Q6_K's vpmaddubsw kernels read rows of blocks: each sums a super-block's integer across
// lanes, then scales it as the tile kernel does, in groups of 4-8 activation rows (with_row_count): the
// same bits there; fewer rows keep fp32 sums per lane, within the int8 bound. The emulation
// runs on every AVX2 CPU; the VNNI instructions themselves where the CPU has them.
TEST(QuantTiles, VnniTileKernelGivesTheBitsOfTheMaddOne) {
  int checked = 0;
  for (ElementType format : {ElementType::q4_k, ElementType::q5_k, ElementType::q6_k, ElementType::iq4_xs})
    for (QuantPath path : {QuantPath::int8_vnni_emulated, QuantPath::int8_vnni}) {
      if (!quant_path_runnable(path, format)) continue;
      ASSERT_TRUE(quant_path_reads_tiles(path, format)) << quant_path_name(path);
      for (int64_t m : {1, 2, 3, 4, 5, 7, 8, 9, 13, 40})
        for (auto [n, blocks] : {std::pair<int64_t, int64_t>{67, 3}, {32, 1}, {16, 7}}) {
          SCOPED_TRACE(::testing::Message() << quant_path_name(path) << " " << element_name(format) << " in "
                                            << kernel_set_summary() << ": m=" << m << " n=" << n);
          TiledProblem p = make_tiled_problem(format, m, n, blocks * unit(format), 3 * m + n);
          if (m == 2) {  // extreme codes: every weight +-1 with one of the other sign a block, activations +-1
            std::vector<float> values(static_cast<size_t>(n * p.k));
            for (size_t i = 0; i < values.size(); ++i) values[i] = (i % 32 == 0 ? -1.0f : 1.0f);
            const int64_t row_bytes = element_row_bytes(format, p.k);
            for (int64_t o = 0; o < n; ++o)
              element_from_f32(format, p.rows.data() + o * row_bytes, values.data() + o * p.k, p.k);
            p.tiled = p.rows;
            quant_tile_rows(format, p.tiled.data(), n / 16, p.k);
            for (int64_t i = 0; i < m * p.k; ++i) p.a[i] = (i / p.k == 0 ? 1.0f : -1.0f);
          }
          const std::vector<float> vnni = product(p, path, p.tiled_weights());
          const std::vector<float> madd = product(p, QuantPath::int8_madd, p.tiled_weights());
          std::vector<float> w(static_cast<size_t>(n * p.k));
          for (int64_t o = 0; o < n; ++o)
            element_to_f32(format, w.data() + o * p.k, p.rows.data() + o * element_row_bytes(format, p.k), p.k);
          for (int64_t r = 0; r < m; ++r)
            for (int64_t o = 0; o < n; ++o) {
              const int64_t group_rows = std::min<int64_t>(8, m - r / 8 * 8);
              const bool same_bits = quant_path_reads_tiles(QuantPath::int8_madd, format) || o >= p.tiled_rows ||
                                     group_rows >= 4;
              if (same_bits) ASSERT_EQ(vnni[r * n + o], madd[r * n + o]) << "row " << r << " col " << o;
              else ASSERT_NEAR(vnni[r * n + o], madd[r * n + o], 2 * int8_bound(p, w, r, o)) << "row " << r << " col " << o;
            }
          ++checked;
        }
    }
  if (quant_path_runnable(QuantPath::int8_madd, ElementType::q4_k)) {
    EXPECT_GT(checked, 0) << "the emulated kernel runs wherever vpmaddubsw's does";
  } else {
    GTEST_SKIP() << "no int8 K-quant kernels in " << kernel_set_summary();
  }
}

TEST(QuantTiles, SameBitsWhateverTheThreadCount) {
  const int threads = omp_get_max_threads();
  for (ElementType format : kTiledFormats)
    for (int64_t m : {1, 3, 8, 17}) {
      const TiledProblem p = make_tiled_problem(format, m, 16 * 21 + 5, unit(format) * 5, 19);
      omp_set_num_threads(1);
      const std::vector<float> one = product(p, QuantPath::automatic, p.tiled_weights());
      omp_set_num_threads(3);
      const std::vector<float> three = product(p, QuantPath::automatic, p.tiled_weights());
      omp_set_num_threads(threads);
      for (size_t i = 0; i < one.size(); ++i)
        ASSERT_EQ(one[i], three[i]) << element_name(format) << " m=" << m << " element " << i;
    }
}

TEST(QuantTiles, ReferenceAndExpandedRowsReadTiles) {
  for (ElementType format : kTiledFormats) {
    const int64_t k = 2 * unit(format);
    const TiledProblem p = make_tiled_problem(format, 2, 37, k, 29);
    std::vector<float> tiled(static_cast<size_t>(2 * 37)), rows(tiled.size());
    quant_matmul_reference(tiled.data(), p.a.data(), 2, p.tiled_weights());
    quant_matmul_reference(rows.data(), p.a.data(), 2, p.row_weights());
    EXPECT_EQ(tiled, rows) << element_name(format);
    std::vector<float> expanded_tiled(static_cast<size_t>(20 * k)), expanded_rows(expanded_tiled.size());
    quant_dequantize_rows(expanded_tiled.data(), p.tiled_weights(), 14, 20);
    quant_dequantize_rows(expanded_rows.data(), p.row_weights(), 14, 20);
    EXPECT_EQ(expanded_tiled, expanded_rows) << element_name(format);
  }
}

TEST(QuantTiles, RefusesTiledRowsThatAreNotWholeTiles) {
  const TiledProblem p = make_tiled_problem(ElementType::q8_0, 1, 40, 64, 31);
  std::vector<float> C(40);
  for (int64_t tiled_rows : {8, 48, -16})
    EXPECT_THROW(quant_matmul(C.data(), p.a.data(), 1, QuantWeights{ElementType::q8_0, p.tiled.data(), 40, 64, tiled_rows}),
                 Error)
        << tiled_rows;
}

}  // namespace
}  // namespace gatedlm::kernels
