// The quantised products of quant_matmul.h: every path the active kernel set runs on this
// CPU (the kernels_* ctest entries repeat this suite once per set) against the
// dequantise-then-multiply oracle, at odd sizes (k an odd number of blocks, n odd, m
// around the groups of 8 rows and the tiles), with strides and accumulation, and the same
// bits whatever the thread count.
//
// Tolerances, each derived from the arithmetic of its path:
//  - fp32_expand multiplies the exact dequantised weights by the exact activations; only
//    fp32 summation differs from the oracle's double sum: each term passes at most k
//    additions, so |error| <= k * 2^-24 * sum |a w| (a loose, safe form of the usual bound).
//  - int8 paths quantise each block of 32 activations as ggml does: id = 127 / amax,
//    q = round(a * id) (|q - a * 127 / amax| <= 1/2 + 127 * 2^-23 after the two fp32
//    roundings), d = fp16(amax / 127) (relative error <= 2^-11 when normal; absolute
//    <= 2^-25 when subnormal). So |a - q d| <= amax * (1/254 + 2^-11 + 2^-20) + 127 * 2^-25
//    per activation, and the product's error from it is at most that times sum |w| over
//    the block, summed over blocks. The integer dots are exact; the scale products and
//    fp32 sums add the fp32 term above. Separately, the int8 paths must equal an
//    emulation of that arithmetic (quantised activations, exact block dots in double)
//    within the fp32 term alone: that pins the quantisation to ggml's.
//  - bf16_dot rounds the activations to bf16 (relative error <= 2^-9, products of two
//    bf16 exact in fp32): 2^-9 * sum |a w| + the fp32 term.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/half_float.h"
#include "kernels/kernel_set.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_matmul.h"
#include "test_files.h"
#include "test_util.h"

namespace gatedlm::kernels {
namespace {

using testing::random_vector;

constexpr ElementType kFormats[] = {ElementType::bf16, ElementType::q8_0, ElementType::q4_0};
constexpr QuantPath kPaths[] = {QuantPath::fp32_expand, QuantPath::int8_madd, QuantPath::int8_vnni,
                                QuantPath::bf16_dot, QuantPath::fp32_tiles, QuantPath::automatic};

struct Problem {
  ElementType format;
  int64_t m, n, k;
  std::vector<float> a;            // [m, k]
  std::vector<uint8_t> blocks;     // n rows of element_row_bytes(format, k)
  std::vector<float> w;            // the dequantised weights [n, k]
  QuantWeights weights() const { return QuantWeights{format, blocks.data(), n, k}; }
};

Problem make_problem(ElementType format, int64_t m, int64_t n, int64_t k, uint64_t seed) {
  Problem p{format, m, n, k, random_vector<float>(m * k, seed, 1.0), {}, {}};
  const std::vector<float> values = random_vector<float>(n * k, seed + 1, 0.5);
  const int64_t row_bytes = element_row_bytes(format, k);
  p.blocks.resize(static_cast<size_t>(n * row_bytes));
  p.w.resize(static_cast<size_t>(n * k));
  for (int64_t o = 0; o < n; ++o) {
    element_from_f32(format, p.blocks.data() + o * row_bytes, values.data() + o * k, k);
    element_to_f32(format, p.w.data() + o * k, p.blocks.data() + o * row_bytes, k);
  }
  return p;
}

// ggml's x86 activation quantisation of one block, as values q * d (see the tolerance note).
void ggml_q8_block(float* out, const float* x) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = f16_to_f32(f32_to_f16(amax / 127.0f));
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  for (int j = 0; j < 32; ++j) out[j] = std::nearbyint(x[j] * id) * d;
}

// The error bound of `path` for out[r, o] (see the note at the top), and the activations
// the path's emulation multiplies (a itself, ggml's int8 blocks, or bf16).
double bound(const Problem& p, QuantPath path, int64_t r, int64_t o) {
  const float* a = p.a.data() + r * p.k;
  const float* w = p.w.data() + o * p.k;
  // Activations rounded in blocks of 32 with an fp16 scale (Q8_0), or in super-blocks of
  // 256 with an fp32 scale for the formats of super-blocks (Q8_K: d = 1 / iscale, so
  // |a - q d| <= amax (1/254 + 2^-20), no fp16 term).
  const bool super_blocks = element_traits(p.format).block_values == 256;
  const int64_t block = super_blocks ? 256 : 32;
  double magnitude = 0.0, activation_term = 0.0;
  for (int64_t b = 0; b < p.k; b += block) {
    double amax = 0.0, wsum = 0.0;
    for (int64_t j = b; j < b + block; ++j) {
      magnitude += std::fabs(static_cast<double>(a[j]) * w[j]);
      amax = std::max(amax, std::fabs(static_cast<double>(a[j])));
      wsum += std::fabs(w[j]);
    }
    activation_term += super_blocks ? amax * (1.0 / 254 + 0x1p-20) * wsum
                                    : (amax * (1.0 / 254 + 0x1p-11 + 0x1p-20) + 127 * 0x1p-25) * wsum;
  }
  const double fp32_term = p.k * 0x1p-24 * magnitude * 1.01 + 1e-30;
  const bool int8 = path == QuantPath::int8_madd || path == QuantPath::int8_vnni || path == QuantPath::int8_vnni_emulated ||
                    (path == QuantPath::automatic && quant_path_runnable(QuantPath::int8_madd, p.format));
  const bool bf16 = path == QuantPath::bf16_dot || (path == QuantPath::automatic && p.format == ElementType::bf16);
  if (int8) return activation_term + fp32_term;
  if (bf16) return 0x1p-9 * magnitude + fp32_term;
  return fp32_term;
}

void expect_near_reference(const Problem& p, QuantPath path, const std::vector<float>& C, int64_t ldc) {
  std::vector<float> reference(static_cast<size_t>(p.m * p.n));
  quant_matmul_reference(reference.data(), p.a.data(), p.m, p.weights());
  for (int64_t r = 0; r < p.m; ++r)
    for (int64_t o = 0; o < p.n; ++o)
      ASSERT_NEAR(C[r * ldc + o], reference[r * p.n + o], bound(p, path, r, o))
          << quant_path_name(path) << " " << element_name(p.format) << " in " << kernel_set_summary()
          << ": m=" << p.m << " n=" << p.n << " k=" << p.k << " at row " << r << " col " << o;
}

std::vector<float> product(const Problem& p, QuantPath path) {
  std::vector<float> C(static_cast<size_t>(p.m * p.n), NAN);
  quant_matmul_path(path, C.data(), p.n, p.a.data(), p.k, p.m, p.weights(), false);
  return C;
}

TEST(QuantMatmul, EveryRunnablePathMatchesTheReference) {
  for (ElementType format : kFormats)
    for (QuantPath path : kPaths) {
      if (!quant_path_runnable(path, format)) continue;
      // k: 3, 6, 17 and 33 blocks (every remainder of the Q4_0 kernel's quads of blocks);
      // m: 1-3 rows, 5 rows, a whole group, groups with 1, 2 and 6 rows left over, many
      // groups; n = 67: four tiles of 16 weight rows and 3 rows past them; n = 32: whole tiles.
      for (int64_t m : {1, 2, 3, 5, 8, 9, 10, 14, 64, 100})
        for (auto [n, k] : {std::pair<int64_t, int64_t>{13, 96}, {11, 32 * 6}, {67, 32 * 17}, {5, 32 * 33}, {32, 64}}) {
          const Problem p = make_problem(format, m, n, k, 100 * m + n);
          expect_near_reference(p, path, product(p, path), p.n);
        }
    }
}

// C against the emulation of an int8 path: each row of A rounded `block` values at a time
// by `round` (ggml's activation quantisation, as values q * d), the exact weights, sums in
// double; within the fp32 sums of the path alone.
void expect_emulated(const Problem& p, const std::vector<float>& C, int64_t block, void (*round)(float*, const float*),
                     const std::string& label) {
  std::vector<float> a8(static_cast<size_t>(p.k));
  for (int64_t r = 0; r < p.m; ++r) {
    for (int64_t b = 0; b < p.k; b += block) round(a8.data() + b, p.a.data() + r * p.k + b);
    for (int64_t o = 0; o < p.n; ++o) {
      double expected = 0.0, magnitude = 0.0;
      for (int64_t j = 0; j < p.k; ++j) {
        expected += static_cast<double>(a8[j]) * p.w[o * p.k + j];
        magnitude += std::fabs(static_cast<double>(a8[j]) * p.w[o * p.k + j]);
      }
      ASSERT_NEAR(C[r * p.n + o], expected, p.k * 0x1p-24 * magnitude + 1e-30) << label << " row " << r << " col " << o;
    }
  }
}

// The int8 paths compute ggml's arithmetic: against the emulation within fp32 sums only.
TEST(QuantMatmul, Int8PathsAreGgmlsActivationQuantisation) {
  for (ElementType format : {ElementType::q8_0, ElementType::q4_0})
    for (QuantPath path : {QuantPath::int8_madd, QuantPath::int8_vnni}) {
      if (!quant_path_runnable(path, format)) continue;
      const Problem p = make_problem(format, 9, 31, 32 * 19, 7);
      expect_emulated(p, product(p, path), 32, ggml_q8_block,
                      std::string(quant_path_name(path)) + " " + element_name(format));
    }
}

// ggml's quantize_row_q8_K_ref for one super-block of 256, as values q * d: max = the first
// value of largest magnitude, iscale = -127 / max, q = min(127, round half to even), d = 1 / iscale.
void ggml_q8_k_block(float* out, const float* x) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 256; ++j)
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  if (amax == 0.0f) {
    std::fill_n(out, 256, 0.0f);
    return;
  }
  const float iscale = -127.0f / max, d = 1.0f / iscale;
  for (int j = 0; j < 256; ++j) out[j] = std::min(127.0f, std::nearbyint(iscale * x[j])) * d;
}

// The same for the K-quants and IQ4_XS against Q8_K super-blocks (ggml_vec_dot_q4_K_q8_K and
// its siblings), rows of zeros and a row whose largest values tie in magnitude included.
TEST(QuantMatmul, KQuantInt8PathIsGgmlsQ8K) {
  for (ElementType format : {ElementType::q2_k, ElementType::q3_k, ElementType::q4_k, ElementType::q5_k,
                             ElementType::q6_k, ElementType::iq4_xs}) {
    if (!quant_path_runnable(QuantPath::int8_madd, format)) continue;
    Problem p = make_problem(format, 10, 23, 256 * 3, 31);
    std::fill_n(p.a.begin() + 2 * p.k, p.k, 0.0f);  // row 2: zeros
    p.a[3 * p.k + 5] = -4.0f;                       // row 3: -4 first, then +4
    p.a[3 * p.k + 200] = 4.0f;
    const std::vector<float> C = product(p, QuantPath::int8_madd);
    expect_emulated(p, C, 256, ggml_q8_k_block, element_name(format));
    for (int64_t o = 0; o < p.n; ++o) ASSERT_EQ(C[2 * p.n + o], 0.0f) << element_name(format) << ": a row of zeros";
  }
}

// Q6_K's rows kernel on vpdpwssd (int8_vnni, AVX512-VNNI CPUs) adds the same int32 products
// as on vpmaddwd + vpaddd (int8_madd): the same bits, at the row counts of the kernel's
// blocks of rows (1-8) and past them, on 1 and 3 threads.
TEST(QuantMatmul, Q6KVnniRowsAreTheMaddRows) {
  if (!quant_path_runnable(QuantPath::int8_vnni, ElementType::q6_k)) GTEST_SKIP() << "no VNNI form of Q6_K's rows here";
  const int threads = omp_get_max_threads();
  for (int64_t m : {1, 3, 8, 13, 40})
    for (int team : {1, 3}) {
      Problem p = make_problem(ElementType::q6_k, m, 37, 256 * 5, 11 * m + team);
      p.a[0] = -8.0f;  // a Q8_K scale set by a negative value: activations of -127 to 127
      omp_set_num_threads(team);
      const std::vector<float> vnni = product(p, QuantPath::int8_vnni), madd = product(p, QuantPath::int8_madd);
      omp_set_num_threads(threads);
      ASSERT_EQ(vnni.size(), madd.size());
      EXPECT_EQ(std::memcmp(vnni.data(), madd.data(), vnni.size() * 4), 0) << "m=" << m << " threads=" << team;
    }
}

TEST(QuantMatmul, StridesAndAccumulation) {
  for (ElementType format : kFormats)
    for (QuantPath path : kPaths) {
      if (!quant_path_runnable(path, format)) continue;
      for (int64_t m : {2, 11, 40}) {
        const Problem p = make_problem(format, m, 19, 160, 3 + m);
        const int64_t lda = p.k + 5, ldc = p.n + 3;
        std::vector<float> a(static_cast<size_t>(m * lda), NAN), C(static_cast<size_t>(m * ldc), 0.5f);
        for (int64_t r = 0; r < m; ++r) std::copy_n(p.a.data() + r * p.k, p.k, a.data() + r * lda);
        if (path == QuantPath::automatic) quant_matmul(C.data(), ldc, a.data(), lda, m, p.weights(), true);
        else quant_matmul_path(path, C.data(), ldc, a.data(), lda, m, p.weights(), true);
        for (int64_t r = 0; r < m; ++r) {
          for (int64_t o = 0; o < p.n; ++o) C[r * ldc + o] -= 0.5f;
          for (int64_t o = p.n; o < ldc; ++o) ASSERT_EQ(C[r * ldc + o], 0.5f) << "padding of C written, row " << r;
        }
        expect_near_reference(p, path, C, ldc);
      }
    }
}

// quant_matmul itself, at decode and prefill sizes (whichever path the set picks: within
// that path's bound).
TEST(QuantMatmul, PublicProductAtDecodeAndPrefillSizes) {
  for (ElementType format : kFormats)
    for (int64_t m : {1, 8, 31, 32, 100}) {
      const Problem p = make_problem(format, m, 45, 32 * 9, 11 + m);
      std::vector<float> C(static_cast<size_t>(m * p.n), NAN);
      quant_matmul(C.data(), p.a.data(), m, p.weights());
      expect_near_reference(p, QuantPath::automatic, C, p.n);
    }
}

TEST(QuantMatmul, SameBitsWhateverTheThreadCount) {
  const int threads = omp_get_max_threads();
  for (ElementType format : kFormats)
    for (QuantPath path : kPaths) {
      if (!quant_path_runnable(path, format)) continue;
      for (int64_t m : {1, 9, 64}) {
        const Problem p = make_problem(format, m, 301, 32 * 5, 17);
        omp_set_num_threads(1);
        const std::vector<float> one = product(p, path);
        omp_set_num_threads(3);
        const std::vector<float> three = product(p, path);
        omp_set_num_threads(threads);
        for (size_t i = 0; i < one.size(); ++i)
          ASSERT_EQ(one[i], three[i]) << quant_path_name(path) << " " << element_name(format) << " m=" << m
                                      << " element " << i;
      }
    }
}

// Weights quantised exactly (integers within Q8_0's range, a block maximum of 127, so
// d = 1) make the oracle the plain product of the fp32 values: this checks the oracle.
TEST(QuantMatmul, ReferenceIsThePlainProductOnExactWeights) {
  const int64_t m = 3, n = 5, k = 96;
  std::vector<float> w(n * k), a = random_vector<float>(m * k, 5, 1.0);
  for (int64_t i = 0; i < n * k; ++i) w[i] = (i % 32 == 0) ? 127.0f : static_cast<float>((i * 37) % 255 - 127);
  std::vector<uint8_t> weights(static_cast<size_t>(n * element_row_bytes(ElementType::q8_0, k)));
  for (int64_t o = 0; o < n; ++o) element_from_f32(ElementType::q8_0, weights.data() + o * 102, w.data() + o * k, k);
  std::vector<float> C(m * n);
  quant_matmul_reference(C.data(), a.data(), m, QuantWeights{ElementType::q8_0, weights.data(), n, k});
  for (int64_t r = 0; r < m; ++r)
    for (int64_t o = 0; o < n; ++o) {
      double expected = 0.0;
      for (int64_t j = 0; j < k; ++j) expected += static_cast<double>(a[r * k + j]) * w[o * k + j];
      EXPECT_EQ(C[r * n + o], static_cast<float>(expected)) << "row " << r << " col " << o;
    }
}

TEST(QuantMatmul, ExpandedRowsAreDequantizeRow) {
  for (ElementType format : kFormats) {
    const Problem p = make_problem(format, 1, 7, 32 * 3, 23);
    std::vector<float> rows(static_cast<size_t>(4 * p.k), NAN);
    quant_dequantize_rows(rows.data(), p.weights(), 2, 4);
    for (int64_t i = 0; i < 4 * p.k; ++i) ASSERT_EQ(rows[i], p.w[2 * p.k + i]) << element_name(format) << " " << i;
    EXPECT_THROW(quant_dequantize_rows(rows.data(), p.weights(), 5, 4), Error);
  }
}

// The other GGUF block formats (kquant_blocks.h), which the products expand block by block:
// every runnable path (fp32_expand, fp32_tiles, the automatic choice) against the oracle,
// with strides and accumulation, the same bits at 1 and 3 threads, and quant_dequantize_rows
// equal to dequantize_row. k: 1, 3 and 5 super-blocks.
constexpr ElementType kExpandedFormats[] = {ElementType::q4_1, ElementType::q5_0, ElementType::q5_1,
                                            ElementType::iq4_nl, ElementType::q2_k, ElementType::q3_k,
                                            ElementType::q4_k, ElementType::q5_k, ElementType::q6_k,
                                            ElementType::iq4_xs};

TEST(QuantMatmul, ExpandedFormatsMatchTheReference) {
  const int threads = omp_get_max_threads();
  for (ElementType format : kExpandedFormats) {
    // The K-quants and IQ4_XS have the int8 path wherever Q8_0 has it.
    const bool int8 = format == ElementType::q2_k || format == ElementType::q3_k || format == ElementType::q4_k ||
                      format == ElementType::q5_k || format == ElementType::q6_k || format == ElementType::iq4_xs;
    EXPECT_EQ(quant_path_runnable(QuantPath::int8_madd, format),
              int8 && quant_path_runnable(QuantPath::int8_madd, ElementType::q8_0))
        << element_name(format);
    // Q4_K, Q5_K, Q6_K and IQ4_XS have vpdpbusd tile kernels (and their emulation) wherever
    // Q8_0 has VNNI (AVX2); on rows of blocks those paths take the rows kernels (Q6_K's on
    // vpdpwssd in the avx512 set).
    const bool tile_vnni = format == ElementType::q4_k || format == ElementType::q5_k || format == ElementType::q6_k ||
                           format == ElementType::iq4_xs;
    EXPECT_EQ(quant_path_runnable(QuantPath::int8_vnni, format),
              tile_vnni && quant_path_runnable(QuantPath::int8_vnni, ElementType::q8_0))
        << element_name(format);
    EXPECT_EQ(quant_path_runnable(QuantPath::int8_vnni_emulated, format),
              tile_vnni && quant_path_runnable(QuantPath::int8_madd, ElementType::q8_0))
        << element_name(format);
    for (QuantPath path : {QuantPath::fp32_expand, QuantPath::fp32_tiles, QuantPath::int8_madd, QuantPath::int8_vnni,
                           QuantPath::int8_vnni_emulated, QuantPath::automatic}) {
      if (!quant_path_runnable(path, format)) continue;
      for (int64_t m : {1, 3, 8, 13, 40})
        for (auto [n, k] : {std::pair<int64_t, int64_t>{7, 256}, {33, 768}, {5, 1280}}) {
          const Problem p = make_problem(format, m, n, k, 7 * m + n);
          expect_near_reference(p, path, product(p, path), p.n);
          const int64_t lda = k + 32, ldc = n + 2;
          std::vector<float> a(static_cast<size_t>(m * lda), NAN), C(static_cast<size_t>(m * ldc), 0.25f);
          for (int64_t r = 0; r < m; ++r) std::copy_n(p.a.data() + r * k, k, a.data() + r * lda);
          omp_set_num_threads(3);
          quant_matmul_path(path, C.data(), ldc, a.data(), lda, m, p.weights(), true);
          omp_set_num_threads(1);
          std::vector<float> one(C.size(), 0.25f);
          quant_matmul_path(path, one.data(), ldc, a.data(), lda, m, p.weights(), true);
          omp_set_num_threads(threads);
          ASSERT_EQ(std::memcmp(C.data(), one.data(), C.size() * 4), 0) << element_name(format) << " m=" << m;
          for (int64_t r = 0; r < m; ++r)
            for (int64_t o = 0; o < ldc; ++o) C[r * ldc + o] = o < n ? C[r * ldc + o] - 0.25f : C[r * ldc + o];
          expect_near_reference(p, path, C, ldc);
        }
    }
    const Problem p = make_problem(format, 1, 6, 512, 29);
    std::vector<float> rows(static_cast<size_t>(3 * p.k), NAN);
    quant_dequantize_rows(rows.data(), p.weights(), 2, 3);
    for (int64_t i = 0; i < 3 * p.k; ++i) ASSERT_EQ(rows[i], p.w[2 * p.k + i]) << element_name(format) << " " << i;
  }
  std::vector<uint8_t> blocks(2 * 144);
  std::vector<float> a(128), c(2);
  const std::string msg = testing::error_of(
      [&] { quant_matmul(c.data(), a.data(), 1, QuantWeights{ElementType::q4_k, blocks.data(), 2, 128}); });
  EXPECT_TRUE(testing::contains(msg, "not a multiple of 256")) << msg;
}

TEST(QuantMatmul, RefusesBadShapesAndPaths) {
  std::vector<uint16_t> weights(2 * 64);
  std::vector<float> a(64), c(4);
  EXPECT_THROW(quant_matmul(c.data(), a.data(), 1, QuantWeights{ElementType::bf16, weights.data(), 2, 40}), Error);
  EXPECT_THROW(quant_matmul(c.data(), 1, a.data(), 64, 1, QuantWeights{ElementType::bf16, weights.data(), 2, 64}, false),
               Error);  // ldc below n
  // BF16 weights have no int8 path in any set.
  EXPECT_FALSE(quant_path_runnable(QuantPath::int8_madd, ElementType::bf16));
  EXPECT_THROW(quant_matmul_path(QuantPath::int8_madd, c.data(), 2, a.data(), 64, 1,
                                 QuantWeights{ElementType::bf16, weights.data(), 2, 64}, false),
               Error);
}

}  // namespace
}  // namespace gatedlm::kernels
