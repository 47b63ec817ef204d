// GGUF export in BF16, F16, Q8_0 and Q4_0 (--dtype): each tensor's ggml type follows
// llama.cpp's rules (norms, routers and 1-D tensors F32; a row that is no whole number of
// 32-value blocks F16; a Q4_0 file's output matrix Q8_0), general.file_type is llama.cpp's
// LLAMA_FTYPE, and the quantised tensors hold exactly the blocks kernels::quantize_row makes
// of the parameters' rows, which dequantise to within half a step of the weights.
// llama.cpp itself loads and runs these files in tests/reference/test_gguf_llama.py.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "gguf_test_reader.h"
#include "io/gguf.h"
#include "kernels/half_float.h"
#include "kernels/quant_blocks.h"
#include "model/param_layout.h"
#include "test_util.h"

namespace gatedlm::io {
namespace {

// d_model 64 (two blocks a row); ffn_hidden 40, so ffn_down's rows are no whole number of
// blocks.
Checkpoint small_checkpoint(const nlohmann::json& extra = nlohmann::json::object()) {
  nlohmann::json j{{"vocab_size", kByteVocabularySize}, {"d_model", 64}, {"n_layers", 1}, {"n_heads", 2},
                   {"n_kv_heads", 1}, {"head_dim", 32}, {"ffn_hidden", 40}, {"max_seq_len", 16}};
  j.update(extra);
  Checkpoint ck{model::config_from_json(j, "test"), {}};
  ck.params = testing::random_vector<float>(model::ParamLayout(ck.config).total(), 9, 0.1);
  return ck;
}

testing::GgufTestFile export_as(const Checkpoint& ck, kernels::ElementType dtype, const std::string& file) {
  const std::string path = (std::filesystem::path(::testing::TempDir()) / file).string();
  export_gguf(ck, dtype, kByteVocabulary, path);
  testing::GgufTestFile f = testing::read_gguf_for_test(path);  // read whole into memory
  std::filesystem::remove(path);
  return f;
}

std::vector<float> values(const Checkpoint& ck, const std::string& name) {
  const model::ParamLayout layout(ck.config);  // at() refers into it: keep it alive
  const model::ParamSpec& s = layout.at(name);
  return {ck.params.begin() + s.offset, ck.params.begin() + s.offset + s.numel};
}

uint32_t type_of(const testing::GgufTestFile& f, const std::string& name) {
  EXPECT_TRUE(f.tensors.count(name)) << name;
  return f.tensors.count(name) ? f.tensors.at(name).type : 999;
}

constexpr uint32_t kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ8_0 = 8, kBF16 = 30;

TEST(GgufDtypes, EachTensorTakesLlamaCppsTypeForTheFileType) {
  const Checkpoint ck = small_checkpoint();
  struct Case {
    kernels::ElementType dtype;
    const char* file;
    uint32_t file_type, matrix, output, short_rows;
  };
  const Case cases[] = {{kernels::ElementType::f32, "t_f32.gguf", 0, kF32, kF32, kF32},
                        {kernels::ElementType::f16, "t_f16.gguf", 1, kF16, kF16, kF16},
                        {kernels::ElementType::bf16, "t_bf16.gguf", 32, kBF16, kBF16, kBF16},
                        {kernels::ElementType::q8_0, "t_q8.gguf", 7, kQ8_0, kQ8_0, kF16},
                        {kernels::ElementType::q4_0, "t_q4.gguf", 2, kQ4_0, kQ8_0, kF16}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    const testing::GgufTestFile f = export_as(ck, c.dtype, c.file);
    EXPECT_EQ(std::get<uint32_t>(f.metadata.at("general.file_type")), c.file_type);
    for (const char* norm : {"output_norm.weight", "blk.0.attn_norm.weight", "blk.0.ffn_norm.weight",
                             "blk.0.attn_q_norm.weight", "blk.0.attn_k_norm.weight"})
      EXPECT_EQ(type_of(f, norm), kF32) << norm;
    for (const char* matrix : {"token_embd.weight", "blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight",
                               "blk.0.attn_output.weight", "blk.0.ffn_gate.weight", "blk.0.ffn_up.weight"})
      EXPECT_EQ(type_of(f, matrix), c.matrix) << matrix;
    EXPECT_EQ(type_of(f, "output.weight"), c.output);
    EXPECT_EQ(type_of(f, "blk.0.ffn_down.weight"), c.short_rows);  // rows of 40 values
  }
}

TEST(GgufDtypes, TiedEmbeddingsAreTheOutputMatrixOfAQ4File) {
  const testing::GgufTestFile f = export_as(small_checkpoint({{"tie_embeddings", true}}), kernels::ElementType::q4_0, "tied_q4.gguf");
  EXPECT_FALSE(f.tensors.count("output.weight"));
  EXPECT_EQ(type_of(f, "token_embd.weight"), kQ8_0);
  EXPECT_EQ(type_of(f, "blk.0.attn_q.weight"), kQ4_0);
}

TEST(GgufDtypes, MoeRoutersStayF32) {
  const Checkpoint ck = small_checkpoint({{"ffn_hidden", 0}, {"moe", {{"n_experts", 4}, {"top_k", 2}, {"expert_hidden", 32}}}});
  const testing::GgufTestFile f = export_as(ck, kernels::ElementType::q8_0, "moe_q8.gguf");
  EXPECT_EQ(type_of(f, "blk.0.ffn_gate_inp.weight"), kF32);
  EXPECT_EQ(type_of(f, "blk.0.ffn_gate_exps.weight"), kQ8_0);
  EXPECT_EQ(type_of(f, "blk.0.ffn_down_exps.weight"), kQ8_0);
}

// The tensor's bytes are quantize_row's blocks of the parameter's rows, and each value
// dequantises to within a quantisation step of the weight (half a step for Q8_0).
void expect_blocks(const testing::GgufTestFile& f, const Checkpoint& ck, const std::string& gguf_name,
                   const std::string& ours, kernels::ElementType format) {
  SCOPED_TRACE(gguf_name);
  const std::vector<float> w = values(ck, ours);
  const int64_t k = ck.config.d_model, rows = static_cast<int64_t>(w.size()) / k;
  const int64_t row_bytes = kernels::element_row_bytes(format, k);
  std::string expected(static_cast<size_t>(rows * row_bytes), '\0');
  for (int64_t r = 0; r < rows; ++r) kernels::element_from_f32(format, expected.data() + r * row_bytes, w.data() + r * k, k);
  const std::string& got = f.tensors.at(gguf_name).bytes;
  ASSERT_GE(got.size(), expected.size());
  EXPECT_EQ(got.substr(0, expected.size()), expected);
  std::vector<float> back(w.size());
  for (int64_t r = 0; r < rows; ++r) kernels::element_to_f32(format, back.data() + r * k, got.data() + r * row_bytes, k);
  // d = max|block| / 127 (Q8_0) or / 8 (Q4_0), stored as fp16 (relative error 2^-11, times
  // up to 127 or 8 steps). Q8_0 rounds to the nearest step; Q4_0's codes reach -8 d but only
  // +7 d, so a value near +8 d is a whole step off.
  const bool q8 = format == kernels::ElementType::q8_0;
  const float steps = q8 ? 127.0f : 8.0f, allowed = q8 ? 0.5f + 127.0f / 2048 : 1.0f + 8.0f / 2048;
  for (int64_t b = 0; b < static_cast<int64_t>(w.size()) / 32; ++b) {
    float max_abs = 0;
    for (int j = 0; j < 32; ++j) max_abs = std::max(max_abs, std::fabs(w[b * 32 + j]));
    for (int j = 0; j < 32; ++j)
      ASSERT_LE(std::fabs(back[b * 32 + j] - w[b * 32 + j]), allowed * max_abs / steps * 1.0001f + 1e-7f);
  }
}

TEST(GgufDtypes, QuantisedTensorsHoldQuantizeRowsBlocks) {
  const Checkpoint ck = small_checkpoint();
  const testing::GgufTestFile q8 = export_as(ck, kernels::ElementType::q8_0, "blocks_q8.gguf");
  expect_blocks(q8, ck, "blk.0.attn_k.weight", "model.layers.0.self_attn.k_proj.weight", kernels::ElementType::q8_0);
  expect_blocks(q8, ck, "token_embd.weight", "model.embed_tokens.weight", kernels::ElementType::q8_0);
  expect_blocks(q8, ck, "output.weight", "lm_head.weight", kernels::ElementType::q8_0);
  const testing::GgufTestFile q4 = export_as(ck, kernels::ElementType::q4_0, "blocks_q4.gguf");
  expect_blocks(q4, ck, "blk.0.ffn_up.weight", "model.layers.0.mlp.up_proj.weight", kernels::ElementType::q4_0);
  expect_blocks(q4, ck, "output.weight", "lm_head.weight", kernels::ElementType::q8_0);
  // The BF16 file: each value the weight rounded to BF16.
  const testing::GgufTestFile bf = export_as(ck, kernels::ElementType::bf16, "blocks_bf16.gguf");
  const std::vector<float> w = values(ck, "model.layers.0.mlp.gate_proj.weight");
  const std::string& got = bf.tensors.at("blk.0.ffn_gate.weight").bytes;
  for (size_t i = 0; i < w.size(); ++i) {
    uint16_t h;
    std::memcpy(&h, got.data() + 2 * i, 2);
    ASSERT_EQ(h, kernels::f32_to_bf16(w[i])) << i;
  }
}

TEST(GgufDtypes, UnknownDtypeIsRefusedNamingTheFlag) {
  for (const char* bad : {"iq2_xxs", "q4_k_s", "int8", ""}) {
    try {
      parse_gguf_dtype(bad);
      ADD_FAILURE() << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--dtype"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("q4_0"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(parse_gguf_dtype("q8_0").base, kernels::ElementType::q8_0);
  EXPECT_EQ(parse_gguf_dtype("q6_k").base, kernels::ElementType::q6_k);
  EXPECT_STREQ(parse_gguf_dtype("q4_k_m").name, "q4_k_m");
}

}  // namespace
}  // namespace gatedlm::io
