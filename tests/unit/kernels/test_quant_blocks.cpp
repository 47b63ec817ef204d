// The inference weight formats of quant_blocks.h: hand-computed blocks with the exact bytes
// ggml's reference quantisers write (the zero block, Q4_0's negative extreme and its clamp,
// rounding at .5) and the round-trip error bound of each format (the products on the
// blocks: test_quant_matmul.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "kernels/half_float.h"
#include "kernels/element_types.h"
#include "kernels/quant_blocks.h"
#include "test_util.h"

namespace gatedlm::kernels {
namespace {

using testing::random_vector;

std::vector<uint8_t> quantized_bytes(ElementType format, const std::vector<float>& x) {
  std::vector<uint8_t> bytes(static_cast<size_t>(element_row_bytes(format, static_cast<int64_t>(x.size()))));
  element_from_f32(format, bytes.data(), x.data(), static_cast<int64_t>(x.size()));
  return bytes;
}

TEST(QuantBlocks, BlockSizesAreGgufs) {
  EXPECT_EQ(element_row_bytes(ElementType::q8_0, 64), 68);
  EXPECT_EQ(element_row_bytes(ElementType::q4_0, 64), 36);
  EXPECT_EQ(element_row_bytes(ElementType::bf16, 64), 128);
}

TEST(QuantBlocks, ZeroBlocks) {
  const std::vector<float> zeros(32, 0.0f);
  std::vector<uint8_t> q8(34, 0);  // d = 0 (fp16 0x0000), every q 0
  EXPECT_EQ(quantized_bytes(ElementType::q8_0, zeros), q8);
  // Q4_0: d = 0 / -8 = -0 (fp16 0x8000), 1/d taken as 0, so every q is trunc(0 + 8.5) = 8:
  // bytes 0x88, not 0x00.
  std::vector<uint8_t> q4(18, 0x88);
  q4[0] = 0x00, q4[1] = 0x80;
  EXPECT_EQ(quantized_bytes(ElementType::q4_0, zeros), q4);
}

// d = 127 / 127 = 1 (fp16 0x3C00), so q = round(x), ties away from zero.
TEST(QuantBlocks, Q8RoundsHalvesAwayFromZero) {
  std::vector<float> x(32, 0.0f);
  const float values[] = {127.0f, -127.0f, 0.5f, -0.5f, 1.5f, 2.5f, -2.5f, 0.49f, -3.2f};
  std::copy(std::begin(values), std::end(values), x.begin());
  std::vector<uint8_t> expected(34, 0);
  expected[0] = 0x00, expected[1] = 0x3C;
  const uint8_t q[] = {0x7F, 0x81, 0x01, 0xFF, 0x02, 0x03, 0xFD, 0x00, 0xFD};  // 127 -127 1 -1 2 3 -3 0 -3
  std::copy(std::begin(q), std::end(q), expected.begin() + 2);
  EXPECT_EQ(quantized_bytes(ElementType::q8_0, x), expected);
}

// The largest magnitude is negative (-8): d = -8 / -8 = 1 (0x3C00) and q = trunc(x + 8.5).
// The +8 of element 1 ties it in magnitude; the first one sets the sign, and +8 clamps
// to 15. Element j sits in byte j's low nibble, element j + 16 in its high nibble.
TEST(QuantBlocks, Q4NegativeExtremeAndClamp) {
  std::vector<float> x(32, 0.0f);
  x[0] = -8.0f, x[1] = 8.0f, x[2] = 0.5f, x[3] = -0.5f, x[4] = 1.49f, x[5] = 7.0f;
  x[16] = 3.0f, x[17] = -7.5f, x[18] = 2.5f;
  std::vector<uint8_t> expected(18, 0x88);  // zeros elsewhere: q = 8 in both nibbles
  expected[0] = 0x00, expected[1] = 0x3C;
  expected[2] = 0xB0;  // x0 -8 -> 0, x16 3 -> 11
  expected[3] = 0x1F;  // x1 8 -> 16 clamped to 15, x17 -7.5 -> 1
  expected[4] = 0xB9;  // x2 0.5 -> 9 (8.5 + .5 = 9.0), x18 2.5 -> 11
  expected[5] = 0x88;  // x3 -0.5 -> trunc(8.0) = 8
  expected[6] = 0x89;  // x4 1.49 -> trunc(9.99) = 9
  expected[7] = 0x8F;  // x5 7 -> 15
  EXPECT_EQ(quantized_bytes(ElementType::q4_0, x), expected);
}

// The largest magnitude is positive (+4): d = 4 / -8 = -0.5 (fp16 0xB800), 1/d = -2, so
// +4 -> trunc(0.5) = 0 and -4 -> 16, clamped to 15.
TEST(QuantBlocks, Q4PositiveExtremeFlipsTheScale) {
  std::vector<float> x(32, 0.0f);
  x[0] = 4.0f, x[16] = -4.0f, x[1] = 1.0f;
  std::vector<uint8_t> expected(18, 0x88);
  expected[0] = 0x00, expected[1] = 0xB8;
  expected[2] = 0xF0;  // x0 -> 0, x16 -> 15
  expected[3] = 0x86;  // x1 1 * -2 + 8.5 = 6.5 -> 6
  EXPECT_EQ(quantized_bytes(ElementType::q4_0, x), expected);
  std::vector<float> back(32);
  element_to_f32(ElementType::q4_0, back.data(), expected.data(), 32);
  EXPECT_EQ(back[0], 4.0f);    // (0 - 8) * -0.5
  EXPECT_EQ(back[16], -3.5f);  // (15 - 8) * -0.5: the clamp's cost
  EXPECT_EQ(back[1], 1.0f);    // (6 - 8) * -0.5
  EXPECT_EQ(back[2], 0.0f);
}

TEST(QuantBlocks, Bf16RoundsTiesToEven) {
  const std::vector<float> x = {1.0f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -2.0f};
  const std::vector<uint8_t> expected = {0x80, 0x3F, 0x80, 0x3F, 0x82, 0x3F, 0x00, 0xC0};
  EXPECT_EQ(quantized_bytes(ElementType::bf16, x), expected);
}

TEST(QuantBlocks, RowsOfPartialBlocksAreRefused) {
  std::vector<float> x(48, 1.0f);
  std::vector<uint8_t> out(200);
  for (ElementType format : {ElementType::q8_0, ElementType::q4_0}) {
    try {
      element_from_f32(format, out.data(), x.data(), 48);
      FAIL() << "a row of 48 values was quantised to " << element_name(format);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("48"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(element_name(format)), std::string::npos) << e.what();
    }
  }
}

// |x - dequantised| per block, against the bound of each format: Q8_0 half a step of
// d = max|x| / 127 plus the fp16 rounding of d (relative 2^-11, times |q| <= 127); Q4_0
// half a step of |d| = max|x| / 8 (a whole step where the clamp at 15 bites, x / d > 7.5)
// plus 8 times d's rounding; BF16 a relative 2^-8 (8 significant bits).
double round_trip_bound(ElementType format, const float* block, int64_t j) {
  float amax = 0.0f;
  for (int64_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(block[i]));
  if (format == ElementType::bf16) return std::fabs(block[j]) * 0x1p-8;
  if (format == ElementType::q8_0) return amax / 127.0 * (0.5 + 127 * 0x1p-11) * (1 + 1e-6);
  float signed_max = 0.0f;
  for (int64_t i = 0; i < 32; ++i)
    if (std::fabs(block[i]) > std::fabs(signed_max)) signed_max = block[i];
  const double d = signed_max / -8.0;
  const double steps = block[j] / d > 7.5 ? 1.0 : 0.5;
  return std::fabs(d) * (steps + 8 * 0x1p-11) * (1 + 1e-6);
}

TEST(QuantBlocks, RoundTripErrorWithinEachFormatsBound) {
  const int64_t k = 32 * 9;
  std::vector<float> x = random_vector<float>(k, 7, 3.0);
  x[40] = 1e-3f;  // a block of tiny values next to ordinary ones
  for (ElementType format : {ElementType::bf16, ElementType::q8_0, ElementType::q4_0}) {
    const std::vector<uint8_t> bytes = quantized_bytes(format, x);
    std::vector<float> back(k);
    element_to_f32(format, back.data(), bytes.data(), k);
    double worst_ratio = 0.0;
    for (int64_t j = 0; j < k; ++j) {
      const double bound = round_trip_bound(format, x.data() + (j / 32) * 32, j % 32);
      const double error = std::fabs(static_cast<double>(x[j]) - back[j]);
      ASSERT_LE(error, bound) << element_name(format) << " element " << j << ": " << x[j] << " -> " << back[j];
      if (bound > 0) worst_ratio = std::max(worst_ratio, error / bound);
    }
    // The bound is not loose: some element comes within a factor 2 of it.
    EXPECT_GT(worst_ratio, 0.5) << element_name(format);
  }
}

}  // namespace
}  // namespace gatedlm::kernels
