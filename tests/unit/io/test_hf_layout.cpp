// The Hugging Face name tables and the paper's fused q|gate row map, and the 16-bit float
// conversions used to read and write BF16 / F16 checkpoints. The end-to-end checks
// against PyTorch are in tests/reference/test_hf_formats.py.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "io/half_float.h"
#include "io/hf_convert.h"
#include "io/hf_names.h"
#include "model/config.h"

namespace gatedlm::io {
namespace {

model::ModelConfig gated(int64_t heads, int64_t kv_heads, const char* granularity) {
  nlohmann::json j{{"vocab_size", 10}, {"d_model", 16}, {"n_layers", 1},  {"n_heads", heads},
                   {"n_kv_heads", kv_heads}, {"head_dim", 4}, {"ffn_hidden", 8}, {"max_seq_len", 8},
                   {"gate", {{"position", "sdpa"}, {"granularity", granularity}}}};
  return model::config_from_json(j, "test");
}

// The row map is a bijection onto the fused tensor's rows, and group g's block holds its
// G query heads then their gates, as the issue describes (written out by hand for G = 2).
TEST(PaperLayoutTest, QueryAndGateRowsTileTheFusedProjectionPerKvGroup) {
  for (const char* granularity : {"headwise", "elementwise"})
    for (int64_t kv : {4, 2, 1}) {  // G = 1, 2, 4
      const model::ModelConfig c = gated(4, kv, granularity);
      const int64_t total = their_rows(c, RowPart::paper_query, c.q_dim());
      EXPECT_EQ(total, c.q_dim() + c.gate_out());
      std::set<int64_t> seen;
      for (int64_t r = 0; r < c.q_dim(); ++r) seen.insert(their_row(c, RowPart::paper_query, r));
      for (int64_t r = 0; r < c.gate_out(); ++r) seen.insert(their_row(c, RowPart::paper_gate, r));
      EXPECT_EQ(static_cast<int64_t>(seen.size()), total) << granularity << " G=" << 4 / kv;
      EXPECT_EQ(*seen.rbegin(), total - 1);
    }
  // G = 2, headwise, head_dim 4: group 0 = q heads 0,1 (rows 0..7), gates 0,1 (rows 8, 9);
  // group 1 = q heads 2,3 (rows 10..17), gates 2,3 (rows 18, 19).
  const model::ModelConfig c = gated(4, 2, "headwise");
  EXPECT_EQ(their_row(c, RowPart::paper_query, 4 * 1 + 3), 7);
  EXPECT_EQ(their_row(c, RowPart::paper_gate, 1), 9);
  EXPECT_EQ(their_row(c, RowPart::paper_query, 4 * 2), 10);
  EXPECT_EQ(their_row(c, RowPart::paper_gate, 3), 19);
  // Elementwise G = 2: group 1 starts at 2 * (8 + 8) / 2 = 16; its gate rows at 16 + 8.
  const model::ModelConfig e = gated(4, 2, "elementwise");
  EXPECT_EQ(their_row(e, RowPart::paper_query, 8), 16);
  EXPECT_EQ(their_row(e, RowPart::paper_gate, 8), 24);
}

TEST(PaperLayoutTest, EveryParameterHasANameInBothFormats) {
  nlohmann::json j = model::config_to_json(gated(4, 2, "elementwise"));
  j["attn_qkv_bias"] = j["attn_o_bias"] = true;
  const model::ModelConfig c = model::config_from_json(j, "test");
  const model::ParamLayout layout(c);
  const auto paper = map_tensors(c, layout, HfFormat::paper);
  EXPECT_EQ(paper.size(), layout.specs().size());
  for (const TensorMapping& m : paper)
    if (m.spec->name == "model.layers.0.self_attn.gate.bias") {
      EXPECT_EQ(m.theirs, "model.layers.0.self_attn.q_proj.bias");
      EXPECT_EQ(m.part, RowPart::paper_gate);
    }
  // Qwen3 has no name for a gate.
  EXPECT_THROW(map_tensors(c, layout, HfFormat::qwen3), Error);
}

TEST(HalfFloatTest, Bf16RoundsToNearestEvenAndKeepsSpecials) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3F808000u)), 0x3F80);  // tie, even stays
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3F818000u)), 0x3F82);  // tie, odd rounds up
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3F808001u)), 0x3F81);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::nanf("")))));
  EXPECT_EQ(bf16_to_f32(0xC040), -3.0f);
}

TEST(HalfFloatTest, F16MatchesTheIeeeEncodingIncludingSubnormals) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3C00);
  EXPECT_EQ(f32_to_f16(-2.0f), 0xC000);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7BFF);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);               // rounds to infinity
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // tie to even: zero
  EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 ulp: tie to even (2)
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie, even stays
  EXPECT_EQ(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  // Every finite half survives f16 -> f32 -> f16.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7C00) == 0x7C00 && (h & 0x3FF)) continue;  // NaN payloads
    ASSERT_EQ(f32_to_f16(f16_to_f32(static_cast<uint16_t>(h))), h) << std::hex << h;
  }
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(std::nanf("")))));
}

}  // namespace
}  // namespace gatedlm::io
