#pragma once
// What the per-set sources of the quantised products share (quant_decode.cpp,
// quant_int8.cpp, quant_kint8.cpp): the walk over weight rows and groups of activation rows, and the int8
// path's entry. A per-set header, like fast_math.h: include it after kernel_set_begin.h.
#ifndef GATEDLM_KSET
#error "quant_kernels.h belongs to a kernel set: include kernel_set_begin.h first"
#endif
#include "kernels/quant_matmul.h"
#include "kernels/quant_tiles.h"

namespace gatedlm::kernels::GATEDLM_KSET {

// Where a group of activation rows writes: C[r * ldc + o] (+)= value for its rows r.
struct QuantOutput {
  float* C;
  int64_t ldc;
  bool accumulate;
  void store(int64_t r, int64_t o, float value) const {
    float& c = C[r * ldc + o];
    c = accumulate ? c + value : value;
  }
};

// f.template operator()<R>() for R = rows (1..kQuantDecodeRows): the kernels are
// instantiated per row count so their accumulators live in registers.
template <class F>
inline void with_row_count(int64_t rows, F&& f) {
  switch (rows) {
    case 1: return f.template operator()<1>();
    case 2: return f.template operator()<2>();
    case 3: return f.template operator()<3>();
    case 4: return f.template operator()<4>();
    case 5: return f.template operator()<5>();
    case 6: return f.template operator()<6>();
    case 7: return f.template operator()<7>();
    default: return f.template operator()<8>();
  }
}
static_assert(kQuantDecodeRows == 8, "with_row_count covers 1..8 rows");

// Weight rows per tile when more than one group of activation rows passes over them:
// about 128 KiB of blocks, so the tile stays in L2 while each group of 8 rows reads it.
inline int64_t quant_tile_rows(int64_t m, int64_t row_bytes) {
  if (m <= kQuantDecodeRows) return 1;
  return std::clamp<int64_t>((int64_t{128} << 10) / std::max<int64_t>(row_bytes, 1), 1, 64);
}

// Whether a product of m rows against n x k weights is worth a team of threads (below
// that, threads cost more than they save).
inline bool worth_threads(int64_t m, int64_t n, int64_t k) { return m * n * k >= (int64_t{1} << 16); }

// visit(t) for t < tiles, shared by the threads of the calling team (every thread calls it):
// the first three quarters in contiguous static shares, with no claims at all, then the last
// quarter guided (halves of what is left, claimed by whichever thread is free), so that a
// thread the host holds up (a VM's other tenants, an interrupt, the other core's cache lines
// of the activations) does not leave the others spinning at the closing barrier. Guided over
// the whole loop (the schedule before; it had cut libgomp's share of a 1B Q4_K_M decode from
// static's 6.1 to 3.6 %) hands a team of 2 its halves at once. At 1B Q4_K_M, batch 1, Zen 5,
// the two threads then finished a ~140 us product 10 us apart on average, with the guided
// quarter 3 us apart. The products' time, both schedules alternated in one process: level at
// batch 1 (memory-bound: the thread left alone reads faster), 1 % less at batches 2 and 8
// (bench/RESULTS.md). Each tile stays whole, on one thread. No barrier at the end: every
// caller's region ends right after (with_decode_team, for_each_row_group), and its closing
// barrier is the one a product needs; the loop's own made a second (a batch-1 decode step of
// the 100M shape met 55 of them, each ~1.4 us on a 2-core Zen 5 VM).
template <class Visit>
void share_tiles(int64_t tiles, Visit&& visit) {
  const int64_t head = tiles - tiles / 4;
#pragma omp for schedule(static) nowait
  for (int64_t t = 0; t < head; ++t) visit(t);
#pragma omp for schedule(guided) nowait
  for (int64_t t = head; t < tiles; ++t) visit(t);
}

// group(o, r0, rows) for every weight row o < n and group of activation rows [r0, r0 +
// rows), rows <= kQuantDecodeRows: OpenMP over tiles of weight rows, each tile visited by
// every group in turn; in_team: the caller's team of threads shares the loop (called by
// every thread of its parallel region), else a region of its own. Which call computes an
// element of C depends on the shapes only, never on the threads (share_tiles).
template <class Group>
void for_each_row_group(int64_t n, int64_t m, int64_t row_bytes, int64_t k, Group&& group, bool in_team = false) {
  const int64_t tile = quant_tile_rows(m, row_bytes);
  const int64_t tiles = (n + tile - 1) / tile;
  const auto visit = [&](int64_t t) {
    const int64_t end = std::min(n, (t + 1) * tile);
    for (int64_t r0 = 0; r0 < m; r0 += kQuantDecodeRows)
      for (int64_t o = t * tile; o < end; ++o) group(o, r0, std::min(kQuantDecodeRows, m - r0));
  };
  if (in_team) return share_tiles(tiles, visit);
#pragma omp parallel if (worth_threads(m, n, k))
  share_tiles(tiles, visit);
}

// f(r0, rows, o0, end) for each group of rows of A (1-8, from r0) and tile of 16 weight
// rows of W, [o0, end) (the last one short when W.rows % 16): for_each_row_group over tiles,
// for the kernels that read W a tile at a time (tiled, or transposed on the fly).
template <class F>
void for_each_tile_group(const QuantWeights& W, int64_t m, int64_t row_bytes, bool in_team, F&& f) {
  const int64_t tiles = (W.rows + kQuantTileRows - 1) / kQuantTileRows;
  for_each_row_group(tiles, m, kQuantTileRows * row_bytes, kQuantTileRows * W.cols, [&](int64_t t, int64_t r0, int64_t rows) {
    const int64_t o0 = kQuantTileRows * t;
    f(r0, rows, o0, std::min(W.rows, o0 + kQuantTileRows));
  }, in_team);
}

// Every 64-byte line of [at, at + bytes) requested ahead of its use, with `kLocality` as
// __builtin_prefetch takes it (3: into L1, 1: into L2 only). Past the end of the weights
// nothing faults.
template <int kLocality>
inline void prefetch_lines(const void* at, int64_t bytes) {
  for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(static_cast<const char*>(at) + b, 0, kLocality);
}

// The next tile's bytes (contiguous, right after this one's) fetched while this one is
// multiplied, a share per block (share(b) of `count`): into L1 when a tile is small (up to
// 8 KiB), else into L2 (a large next tile fetched into L1 evicts the current one and the
// activations: measured 1.4x slower for Q8_0 at the 1B shape's 35 KiB tiles, 1.2x at the
// 100M shape's 13 KiB). A tile's rows are 16 short streams the hardware prefetcher does not
// learn; tiles in quant_tiles.h's layout are one stream, which it follows, but not far
// enough ahead (measured). The K-quants' tile kernels (quant_kint8.cpp, tiled_rows) take
// prefetch_rows_ahead per super-block instead: 3-8 % faster with vpmaddubsw on Zen 3, 1.6-2.4x
// with vpdpbusd on Zen 5 at batch 1. So do the Q8_0 / Q4_0 tiles, vpdpbusd (rows_times_tiled:
// on Zen 5 batch 8 1.6-2x faster, batch 1 level to 1.1x) and vpmaddubsw (on Zen 3 1.1-1.2x at
// batch 1), and the BF16 tiles (bf16_tile_rows; on Zen 3 1.04-1.33x at batch 8; untimed on
// AVX-512 CPUs without AVX512-BF16). The only user left is rows_times_weight_tile
// (quant_int8_kernels.inc: Q8_0 / Q4_0 rows of blocks read as tiles, weights that were not
// tiled at load), untimed since.
// Weights in rows of blocks are read front to back, one stream per thread, which the hardware
// prefetcher follows but not far enough ahead on every CPU: on an Intel Xeon with the AVX2
// kernels forced, Q6_K's rows kernel read 1.6x faster with each block's bytes requested 4 KiB
// ahead (bench/RESULTS.md, "Decode on an Intel Xeon with AVX-512 VNNI"). The rows kernels call
// this once per block (and the K-quants' tile kernels once per super-block); past the end
// of the weights it fetches nothing that faults.
constexpr int64_t kRowsPrefetchBytes = 4096;
inline void prefetch_rows_ahead(const void* block, int64_t bytes) {
  prefetch_lines<3>(static_cast<const char*>(block) + kRowsPrefetchBytes, bytes);
}

struct TilePrefetch {
  const char* next;
  int64_t tile_bytes, count;
  bool into_l1;
  TilePrefetch(const void* tile, int64_t bytes, int64_t blocks)
      : next(static_cast<const char*>(tile) + bytes), tile_bytes(bytes), count(blocks), into_l1(bytes <= 8192) {}
  void share(int64_t b) const {
    const int64_t from = b * tile_bytes / count, to = (b + 1) * tile_bytes / count;
    if (into_l1) prefetch_lines<3>(next + from, to - from);
    else prefetch_lines<1>(next + from, to - from);
  }
};

// f(in_team) for a product of m rows against W: at decode (at most kQuantDecodeRows rows,
// worth threads) called by every thread of one parallel region, so that each thread
// prepares the few activation rows itself, into its own buffers, and goes straight on to
// its share of the weights (one shared copy made by the calling thread costs a wait and
// stalls on stores to lines the other core read: measured 2x slower); else once, by the
// calling thread, the product opening its own region.
template <class F>
void with_decode_team(int64_t m, const QuantWeights& W, F&& f) {
  if (m <= kQuantDecodeRows && worth_threads(m, W.rows, W.cols)) {
#pragma omp parallel
    f(true);
    return;
  }
  f(false);
}

// The int8 paths (quant_int8.cpp): Q8_0 / Q4_0 weights, activations quantised to int8
// blocks first. vnni: vpdpbusd, else vpmaddubsw. Sets without AVX2 have neither.
bool int8_vnni_runnable();
void int8_product(bool vnni, const QuantOutput& out, const float* A, int64_t lda, int64_t m, const QuantWeights& W);
// The int8 path of the K-quants (quant_kint8.cpp): Q4_K, Q5_K, Q6_K and IQ4_XS weights
// (kquant_int8_format), activations quantised to ggml's Q8_K super-blocks first, vpmaddubsw.
// The integer dots of tiled Q4_K / Q5_K / Q6_K / IQ4_XS weights: vpmaddubsw (Q4_K, Q5_K),
// vpdpbusd (int8_vnni_runnable CPUs), or vpdpbusd emulated by AVX2 instructions (the same
// integers: how CPUs without VNNI test that kernel). The rows kernels take vpmaddubsw; Q6_K's
// adds its pairs by vpdpwssd with KQuantTileDot::vnni (avx512 set).
// kquant_vnni_format: the formats with a vpdpbusd tile kernel (Q4_K, Q5_K, Q6_K, IQ4_XS; none
// in the generic set), the K-quant formats of path int8_vnni.
enum class KQuantTileDot { madd, vnni, vnni_emulated };
bool kquant_int8_format(ElementType format);
bool kquant_vnni_format(ElementType format);
void kquant_int8_product(const QuantOutput& out, const float* A, int64_t lda, int64_t m, const QuantWeights& W,
                         KQuantTileDot tile_dot);

}  // namespace gatedlm::kernels::GATEDLM_KSET
