// kernels/kquant_blocks.h: each format's bits read as ggml lays them out, checked on blocks
// built by hand with values worked out by hand (ggml's own output is the reference test
// tests/reference/test_ggml_blocks.py); and quantising then dequantising keeps each format's
// precision, more bits giving less error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/element_types.h"
#include "kernels/kquant_blocks.h"

namespace gatedlm::kernels {
namespace {

constexpr uint16_t kHalf = 0x3800, kOne = 0x3C00, kTwo = 0x4000, kMinusOne = 0xBC00;  // fp16 0.5, 1, 2, -1

template <class Block>
std::vector<float> dequantized(ElementType type, const Block& block) {
  const int64_t n = element_traits(type).block_values;
  std::vector<float> out(static_cast<size_t>(n));
  element_to_f32(type, out.data(), &block, n);
  return out;
}

TEST(KQuantBlocks, ThirtyTwoValueFormats) {
  BlockQ4_1 q41{};
  q41.d = kHalf, q41.m = kMinusOne, q41.qs[0] = 0x3A;  // element 0: 10, element 16: 3
  auto y = dequantized(ElementType::q4_1, q41);
  EXPECT_EQ(y[0], 4.0f);   // 10 * 0.5 - 1
  EXPECT_EQ(y[16], 0.5f);  // 3 * 0.5 - 1
  EXPECT_EQ(y[1], -1.0f);

  BlockQ5_0 q50{};
  q50.d = kHalf, q50.qs[0] = 0x3A, q50.qh[0] = 0x01;  // element 0's fifth bit set, element 16's clear
  y = dequantized(ElementType::q5_0, q50);
  EXPECT_EQ(y[0], 5.0f);    // (10 + 16 - 16) * 0.5
  EXPECT_EQ(y[16], -6.5f);  // (3 - 16) * 0.5
  q50.qh[2] = 0x01;         // element 16's fifth bit (bit 16)
  EXPECT_EQ(dequantized(ElementType::q5_0, q50)[16], 1.5f);

  BlockQ5_1 q51{};
  q51.d = kHalf, q51.m = kMinusOne, q51.qs[0] = 0x3A, q51.qh[0] = 0x01;
  y = dequantized(ElementType::q5_1, q51);
  EXPECT_EQ(y[0], 12.0f);  // 26 * 0.5 - 1
  EXPECT_EQ(y[16], 0.5f);

  BlockIq4Nl nl{};
  nl.d = kTwo, nl.qs[0] = 0xF0;  // element 0: index 0, element 16: index 15
  y = dequantized(ElementType::iq4_nl, nl);
  EXPECT_EQ(y[0], -254.0f);
  EXPECT_EQ(y[16], 226.0f);
  EXPECT_EQ(y[1], -254.0f);  // index 0 too
}

TEST(KQuantBlocks, TwoAndThreeBitSuperBlocks) {
  BlockQ2_K q2{};
  q2.d = kOne, q2.dmin = kHalf;
  q2.scales[0] = 0x23, q2.scales[1] = 0x10, q2.scales[2] = 0x15, q2.scales[6] = 0x02, q2.scales[8] = 0x01;
  q2.qs[0] = 0xE4;  // 2-bit fields 0, 1, 2, 3: elements 0, 32, 64, 96
  q2.qs[32] = 0x03;  // element 128
  auto y = dequantized(ElementType::q2_k, q2);
  EXPECT_EQ(y[0], -1.0f);   // 3 * 0 - 0.5 * 2
  EXPECT_EQ(y[16], -0.5f);  // sub-block 1: 0 * 0 - 0.5 * 1
  EXPECT_EQ(y[32], 4.5f);   // sub-block 2: 5 * 1 - 0.5 * 1
  EXPECT_EQ(y[64], 0.0f);   // sub-block 4: scale 0, min 0
  EXPECT_EQ(y[96], 6.0f);   // sub-block 6: 2 * 3
  EXPECT_EQ(y[128], 3.0f);  // sub-block 8: 1 * 3

  BlockQ3_K q3{};
  q3.d = kOne;
  q3.scales[0] = 0x01, q3.scales[8] = 0x02;  // sub-block 0: 1 | 2 << 4 = 33, minus 32: 1; the others -32
  q3.qs[0] = 0x03, q3.hmask[0] = 0x01;      // element 0: 3, high bit set
  q3.qs[16] = 0x01;                          // element 16 (sub-block 1): 1, high bit clear
  q3.qs[8] = 0x08, q3.hmask[8] = 0x02;      // element 40 (sub-block 2): 2 at bits 2-3, high bit 1 of hmask[8]
  y = dequantized(ElementType::q3_k, q3);
  EXPECT_EQ(y[0], 3.0f);
  EXPECT_EQ(y[1], -4.0f);   // 0 - 4
  EXPECT_EQ(y[16], 96.0f);  // -32 * (1 - 4)
  EXPECT_EQ(y[40], -64.0f);  // -32 * 2
}

// Q4_K / Q5_K share the 12 bytes of 6-bit scales and mins: sub-block 0 scale 2, min 1;
// sub-block 1 scale 3, min 0; sub-block 5 scale 1 | 3 << 4 = 49, min 2 | 1 << 4 = 18.
template <class Block>
void set_k4_scales(Block& b) {
  b.d = kOne, b.dmin = kHalf;
  b.scales[0] = 2, b.scales[4] = 1;
  b.scales[1] = 0xC0 | 3, b.scales[5] = 0x40, b.scales[9] = 0x21;
  b.qs[0] = 0x3A;   // element 0: 10 (sub-block 0), element 32: 3 (sub-block 1)
  b.qs[64] = 0x70;  // element 160 (sub-block 5, high nibble): 7
}

TEST(KQuantBlocks, FourFiveAndSixBitSuperBlocks) {
  BlockQ4_K q4{};
  set_k4_scales(q4);
  auto y = dequantized(ElementType::q4_k, q4);
  EXPECT_EQ(y[0], 19.5f);    // 2 * 10 - 0.5 * 1
  EXPECT_EQ(y[32], 9.0f);    // 3 * 3
  EXPECT_EQ(y[160], 334.0f);  // 49 * 7 - 0.5 * 18

  BlockQ5_K q5{};
  set_k4_scales(q5);
  q5.qh[0] = 0x21;  // fifth bits of element 0 (bit 0) and element 160 (bit 5)
  y = dequantized(ElementType::q5_k, q5);
  EXPECT_EQ(y[0], 51.5f);      // 2 * 26 - 0.5
  EXPECT_EQ(y[32], 9.0f);
  EXPECT_EQ(y[160], 1118.0f);  // 49 * 23 - 9

  BlockQ6_K q6{};
  q6.d = kHalf;
  q6.scales[0] = 2, q6.scales[2] = -3, q6.scales[4] = 1, q6.scales[6] = 4;
  q6.ql[0] = 0x5A, q6.ql[32] = 0x03, q6.qh[0] = 0xE4;  // qh[0]'s 2-bit fields 0, 1, 2, 3
  y = dequantized(ElementType::q6_k, q6);
  EXPECT_EQ(y[0], -22.0f);   // 0.5 * 2 * (10 - 32)
  EXPECT_EQ(y[32], 19.5f);   // 0.5 * -3 * (3 + 16 - 32)
  EXPECT_EQ(y[64], 2.5f);    // 0.5 * 1 * (5 + 32 - 32)
  EXPECT_EQ(y[96], 32.0f);   // 0.5 * 4 * (0 + 48 - 32)

  BlockIq4Xs xs{};
  xs.d = kOne, xs.scales_l[0] = 0x01, xs.scales_h = 0x0002;  // sub-block 0: 33 - 32 = 1; sub-block 1: -32
  xs.qs[0] = 0xF0, xs.qs[16] = 0x08;
  y = dequantized(ElementType::iq4_xs, xs);
  EXPECT_EQ(y[0], -127.0f);
  EXPECT_EQ(y[16], 113.0f);
  EXPECT_EQ(y[32], -32.0f);  // -32 * kIq4Values[8] (1)
}

// Relative RMS error of quantising then dequantising 64 rows of 1024 normal values.
double round_trip_error(ElementType type) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  const int64_t n = 1024, rows = 64;
  std::vector<float> x(static_cast<size_t>(n)), back(static_cast<size_t>(n));
  std::vector<uint8_t> blocks(static_cast<size_t>(element_row_bytes(type, n)));
  double err = 0, norm = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : x) v = normal(rng);
    element_from_f32(type, blocks.data(), x.data(), n);
    element_to_f32(type, back.data(), blocks.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      err += (back[i] - x[i]) * static_cast<double>(back[i] - x[i]);
      norm += x[i] * static_cast<double>(x[i]);
    }
  }
  return std::sqrt(err / norm);
}

TEST(KQuantBlocks, RoundTripsKeepEachFormatsPrecision) {
  // Measured (these conversions equal ggml's: test_ggml_blocks.py): Q6_K 0.018, Q5_K 0.036,
  // Q5_1 0.038, Q5_0 0.043, Q4_K 0.072, IQ4_NL 0.076, IQ4_XS 0.077, Q4_1 0.078, Q3_K 0.152,
  // Q2_K 0.297; the bounds are 15 % above.
  const struct {
    ElementType type;
    double at_most;
  } formats[] = {{ElementType::q6_k, 0.021},   {ElementType::q5_k, 0.042},   {ElementType::q5_0, 0.05},
                 {ElementType::q5_1, 0.044},   {ElementType::q4_k, 0.083},   {ElementType::iq4_xs, 0.089},
                 {ElementType::iq4_nl, 0.088}, {ElementType::q4_1, 0.09},    {ElementType::q3_k, 0.175},
                 {ElementType::q2_k, 0.34}};
  double q6 = 0, q5 = 0, q4 = 0, q3 = 0, q2 = 0;
  for (const auto& f : formats) {
    const double e = round_trip_error(f.type);
    EXPECT_LT(e, f.at_most) << element_name(f.type);
    EXPECT_GT(e, 0.0) << element_name(f.type);
    if (f.type == ElementType::q6_k) q6 = e;
    if (f.type == ElementType::q5_k) q5 = e;
    if (f.type == ElementType::q4_k) q4 = e;
    if (f.type == ElementType::q3_k) q3 = e;
    if (f.type == ElementType::q2_k) q2 = e;
  }
  EXPECT_TRUE(q6 < q5 && q5 < q4 && q4 < q3 && q3 < q2) << q6 << " " << q5 << " " << q4 << " " << q3 << " " << q2;
}

TEST(KQuantBlocks, ZeroRowsStayZero) {
  for (ElementType type : {ElementType::q4_1, ElementType::q5_0, ElementType::q5_1, ElementType::iq4_nl, ElementType::q2_k,
                           ElementType::q3_k, ElementType::q4_k, ElementType::q5_k, ElementType::q6_k,
                           ElementType::iq4_xs}) {
    const std::vector<float> zeros(512, 0.0f);
    std::vector<uint8_t> blocks(static_cast<size_t>(element_row_bytes(type, 512)));
    std::vector<float> back(512, 1.0f);
    element_from_f32(type, blocks.data(), zeros.data(), 512);
    element_to_f32(type, back.data(), blocks.data(), 512);
    for (float v : back) ASSERT_EQ(v, 0.0f) << element_name(type);
  }
}

}  // namespace
}  // namespace gatedlm::kernels
