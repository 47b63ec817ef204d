// kernels/element_types.h: every row is found by its own ggml id and no other, ids ggml
// removed are unknown, row bytes follow the block geometry (and refuse partial blocks), the
// conversions round-trip where the type is exact, and --type-style parsing names the values.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/element_types.h"
#include "test_files.h"

namespace gatedlm::kernels {
namespace {

TEST(ElementTypes, EveryRowIsFoundByItsIdAndRemovedIdsAreUnknown) {
  for (const ElementTraits& t : element_types()) EXPECT_EQ(find_element_type(static_cast<uint32_t>(t.type)), &t) << t.name;
  for (uint32_t removed : {4u, 5u, 31u, 36u, 40u, 1000u}) EXPECT_EQ(find_element_type(removed), nullptr) << removed;
  EXPECT_STREQ(find_element_type(16)->ggml_name, "IQ2_XXS");  // a grid type: named, not converted
  EXPECT_EQ(find_element_type(16)->to_f32, nullptr);
  EXPECT_NE(find_element_type(12)->to_f32, nullptr);  // Q4_K
  EXPECT_TRUE(testing::contains(element_names_readable(), "Q4_K, Q5_K, Q6_K")) << element_names_readable();
  EXPECT_FALSE(testing::contains(element_names_readable(), "IQ2_XXS")) << element_names_readable();
}

TEST(ElementTypes, RowBytesFollowTheBlocks) {
  EXPECT_EQ(element_row_bytes(ElementType::f32, 10), 40);
  EXPECT_EQ(element_row_bytes(ElementType::bf16, 10), 20);
  EXPECT_EQ(element_row_bytes(ElementType::q8_0, 64), 68);
  EXPECT_EQ(element_row_bytes(ElementType::q4_0, 64), 36);
  EXPECT_TRUE(testing::contains(testing::error_of([] { element_row_bytes(ElementType::q4_0, 48); }), "multiple of 32"));
  EXPECT_EQ(element_row_bytes(ElementType::q4_k, 512), 288);
  EXPECT_EQ(element_row_bytes(ElementType::iq4_xs, 256), 136);
  EXPECT_TRUE(testing::contains(testing::error_of([] { element_row_bytes(ElementType::q6_k, 384); }), "multiple of 256"));
}

TEST(ElementTypes, PlainTypesRoundTripAndParsingNamesTheValues) {
  const std::vector<float> x{1.0f, -2.5f, 0.15625f, 65504.0f};
  for (ElementType t : {ElementType::f32, ElementType::f16, ElementType::bf16}) {
    std::vector<uint8_t> bytes(static_cast<size_t>(element_row_bytes(t, 4)));
    std::vector<float> back(4);
    element_from_f32(t, bytes.data(), x.data(), 4);
    element_to_f32(t, back.data(), bytes.data(), 4);
    for (size_t i = 0; i + 1 < x.size(); ++i) EXPECT_EQ(back[i], x[i]) << element_name(t);
  }
  const ElementType accepted[] = {ElementType::q8_0, ElementType::q4_0};
  EXPECT_EQ(parse_element_type("q4_0", "--type", accepted), ElementType::q4_0);
  const std::string msg = testing::error_of([&] { parse_element_type("q4_k", "--type", accepted); });
  EXPECT_TRUE(testing::contains(msg, "--type q4_k") && testing::contains(msg, "q8_0 | q4_0")) << msg;
}

}  // namespace
}  // namespace gatedlm::kernels
