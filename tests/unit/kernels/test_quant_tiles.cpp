// The tiled layout of Q8_0 / Q4_0 weights (quant_tiles.h): the bytes land where the header
// says, rows come back unchanged, and every product path gives the same results on tiled
// weights as on rows of blocks: the paths that read tiles (the AVX-512 VNNI kernels) the
// same bits as their row-block kernels where those take whole tiles too (4-8 rows), within
// the int8 bound of the reference at every m; every other path through its row-major copy
// (the kernels_* entries repeat this suite once per kernel set).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
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

constexpr ElementType kTiledFormats[] = {ElementType::q8_0, ElementType::q4_0};

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
  for (ElementType format : kTiledFormats) {
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
          ASSERT_EQ(std::memcmp(tile + count * values + (16 * b + i) * 2, block, 2), 0)
              << element_name(format) << " scale of tile " << t << " row " << i << " block " << b;
          for (int s = 0; s < dwords; ++s)
            for (int j = 0; j < 4; ++j)
              ASSERT_EQ(tile[b * values + 64 * s + 4 * i + j], block[2 + 4 * s + j] ^ bias)
                  << element_name(format) << " value byte " << 4 * s + j << " of tile " << t << " row " << i;
        }
    // The rows past the tiles stay as they were; back from tiles, every byte is the row's.
    EXPECT_EQ(std::memcmp(tiled.data() + 32 * row_bytes, rows.data() + 32 * row_bytes, 3 * row_bytes), 0);
    quant_untile_rows(format, tiled.data(), 2, k);
    EXPECT_EQ(tiled, rows) << element_name(format);
  }
}

TEST(QuantTiles, CopyRowsReadsTilesAndRows) {
  const int64_t k = 64, n = 53;
  for (ElementType format : kTiledFormats) {
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
  std::vector<uint8_t> bf16(64 * 64 * 2);
  EXPECT_THROW(quant_tile_rows(ElementType::bf16, bf16.data(), 1, 64), Error);
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
double int8_bound(const TiledProblem& p, const std::vector<float>& w, int64_t r, int64_t o) {
  double magnitude = 0.0, activation_term = 0.0;
  for (int64_t b = 0; b < p.k; b += 32) {
    double amax = 0.0, wsum = 0.0;
    for (int64_t j = b; j < b + 32; ++j) {
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
                           QuantPath::automatic}) {
      if (!quant_path_runnable(path, format)) continue;
      // n: tiles and rows past them, whole tiles only; k: odd numbers of blocks.
      for (int64_t m : {1, 2, 3, 4, 7, 8, 9, 12, 40})
        for (auto [n, k] : {std::pair<int64_t, int64_t>{67, 32 * 3}, {32, 32 * 17}, {16, 64}}) {
          SCOPED_TRACE(::testing::Message() << quant_path_name(path) << " " << element_name(format) << " in "
                                            << kernel_set_summary() << ": m=" << m << " n=" << n << " k=" << k);
          const TiledProblem p = make_tiled_problem(format, m, n, k, 10 * m + n);
          const QuantPath resolved = path == QuantPath::automatic ? quant_best_path(format, m) : path;
          const bool reads_tiles = quant_path_reads_tiles(resolved, format);
          const std::vector<float> tiled = product(p, path, p.tiled_weights()), rows = product(p, path, p.row_weights());
          // Where both sides take whole tiles of 16 weight rows through the same arithmetic
          // (vpdpbusd's groups of 4-8 rows), or where tiles are copied back to rows: the
          // same bits. (vpmaddubsw's tile kernel sums each block in one lane, its row
          // kernels across lanes: the same dots, fp32 sums in another order.)
          const bool same_kernels =
              !reads_tiles || (resolved == QuantPath::int8_vnni && (m % 8 == 0 || m % 8 >= 4));
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

TEST(QuantTiles, SameBitsWhateverTheThreadCount) {
  const int threads = omp_get_max_threads();
  for (ElementType format : kTiledFormats)
    for (int64_t m : {1, 3, 8, 17}) {
      const TiledProblem p = make_tiled_problem(format, m, 16 * 21 + 5, 32 * 5, 19);
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
    const TiledProblem p = make_tiled_problem(format, 2, 37, 64, 29);
    std::vector<float> tiled(static_cast<size_t>(2 * 37)), rows(tiled.size());
    quant_matmul_reference(tiled.data(), p.a.data(), 2, p.tiled_weights());
    quant_matmul_reference(rows.data(), p.a.data(), 2, p.row_weights());
    EXPECT_EQ(tiled, rows) << element_name(format);
    std::vector<float> expanded_tiled(static_cast<size_t>(20 * 64)), expanded_rows(expanded_tiled.size());
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
