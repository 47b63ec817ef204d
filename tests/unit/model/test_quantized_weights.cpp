// A model with quantised weights (model/quantized_weights.h) against the same model with
// the dequantised weights in fp32: dense, gated, MoE and switch-head configs, tied and
// untied embeddings, a matrix too narrow to quantise, few rows (the blocks read directly)
// and many (prefill tiles). The quantised model's fp32 copies of its matrices are
// overwritten with NaN first, so a product that missed the blocks shows as NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "kernels/kernel_set.h"
#include "kernels/matmul.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_matmul.h"
#include "kernels/weight.h"
#include "model/config.h"
#include "model/init.h"
#include "model/model.h"
#include "model/quantized_weights.h"
#include "test_files.h"
#include "kernel_set_guard.h"
#include "test_util.h"

namespace gatedlm::model {
namespace {

using nlohmann::json;
namespace k = kernels;
using gatedlm::testing::KernelSetGuard;

json base_json() {
  return json{{"vocab_size", 300}, {"d_model", 64},  {"n_layers", 2},      {"n_heads", 4},
              {"n_kv_heads", 2},   {"head_dim", 16}, {"ffn_hidden", 96},   {"max_seq_len", 128},
              {"init_std", 0.1},   {"qk_norm", true}, {"tie_embeddings", true}};
}

json with(json j, const json& extra) {
  j.update(extra);
  return j;
}

// Logits [batch * seq, vocab] of one forward of seeded tokens.
std::vector<float> logits_of(Model<float>& m, int64_t batch, int64_t seq) {
  std::vector<int32_t> tokens(batch * seq);
  Rng rng(7);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng.below(m.config().vocab_size));
  m.forward(tokens.data(), nullptr, batch, seq);
  return {m.logits(), m.logits() + batch * seq * m.config().vocab_size};
}

// Every quantised tensor but the embedding (whose rows the lookup copies) set to NaN.
void poison_f32_copies(Model<float>& m) {
  for (const ParamSpec& s : m.layout().specs())
    if (quantized_tensor(s) && s.kind != ParamKind::embedding)
      std::fill_n(m.params().data() + s.offset, s.numel, std::numeric_limits<float>::quiet_NaN());
}

// Tolerances. In the generic kernel set every product on the blocks keeps fp32 numerics
// (kernels/quant_matmul.h: fp32_expand, fp32 tiles), so the quantised model must give the
// dequantised model's logits up to fp32 summation order: kExact. The kernel set this CPU
// picks may round the activations to int8 blocks (Q8_0 / Q4_0: 1/254 of a block's largest
// value) or bf16 (2^-8) in its dot products; through two blocks and the head that stays
// below 2e-2 of the logits' norm for a dense model (kRounded). With routing (MoE, switch
// heads) such rounding can flip a token's expert, so those models are checked in the
// generic set only.
constexpr double kExact = 1e-4, kRounded = 2e-2;

void expect_quantised_forward_matches(const json& config_json, k::ElementType format, double tolerance) {
  SCOPED_TRACE(config_json.dump() + " " + k::element_name(format));
  const ModelConfig c = config_from_json(config_json, "test");
  Model<float> original(c), quantised(c), dequantised(c);
  std::vector<float> params;
  init_params(params, original.layout(), c, 3);
  original.load_params(params);
  quantised.load_params(params);
  const std::unique_ptr<QuantizedWeights> q = quantize_model(quantised, format, /*release_f32=*/false);
  dequantised.load_params(quantised.params());  // the dequantised values, before they go
  q->release_f32();
  poison_f32_copies(quantised);
  EXPECT_GT(q->bytes(), 0);
  for (const auto& [batch, seq] : {std::pair<int64_t, int64_t>{1, 3}, {2, 5}, {2, 100}}) {
    SCOPED_TRACE(::testing::Message() << "rows " << batch * seq);
    const std::vector<float> got = logits_of(quantised, batch, seq), want = logits_of(dequantised, batch, seq);
    for (float v : got) ASSERT_TRUE(std::isfinite(v)) << "a product read the poisoned fp32 copy";
    const double err = gatedlm::testing::rel_error(got, want);
    EXPECT_LT(err, tolerance);
    if (format == k::ElementType::q4_0) {  // the comparison can tell weights apart: Q4_0 moves the logits more
      EXPECT_GT(gatedlm::testing::rel_error(logits_of(original, batch, seq), want), 2 * err);
    }
  }
}

// The same in the generic kernel set, to fp32 summation order.
void expect_exact_forward(const json& config_json, k::ElementType format) {
  const KernelSetGuard generic(k::KernelSet::generic);
  expect_quantised_forward_matches(config_json, format, kExact);
}

TEST(QuantizedWeights, WhichTensorsAreQuantised) {
  const ModelConfig c = config_from_json(
      with(base_json(), {{"ffn_hidden", 40}, {"moe", {{"n_experts", 4}, {"top_k", 2}, {"expert_hidden", 32}, {"n_shared", 1}}},
                         {"tie_embeddings", false}}),
      "test");
  const ParamLayout layout(c);
  EXPECT_TRUE(quantized_tensor(layout.at("model.embed_tokens.weight")));
  EXPECT_TRUE(quantized_tensor(layout.at("lm_head.weight")));
  EXPECT_TRUE(quantized_tensor(layout.at("model.layers.0.self_attn.q_proj.weight")));
  EXPECT_TRUE(quantized_tensor(layout.at("model.layers.0.mlp.experts.3.down_proj.weight")));
  EXPECT_TRUE(quantized_tensor(layout.at("model.layers.0.mlp.shared_expert.up_proj.weight")));
  EXPECT_FALSE(quantized_tensor(layout.at("model.layers.0.mlp.gate.weight")));  // router
  EXPECT_FALSE(quantized_tensor(layout.at("model.layers.0.mlp.shared_expert_gate.weight")));
  EXPECT_FALSE(quantized_tensor(layout.at("model.layers.0.input_layernorm.weight")));
  EXPECT_FALSE(quantized_tensor(layout.at("model.layers.0.self_attn.q_norm.weight")));
  // Row bytes of each format, and the blocks of one tensor where quant_row_bytes says.
  QuantizedWeights q(layout, k::ElementType::q8_0);
  const ParamSpec& wq = layout.at("model.layers.1.self_attn.q_proj.weight");
  EXPECT_EQ(static_cast<int64_t>(q.tensor_bytes(wq).size()), 64 * 34 / 32 * 64);
  EXPECT_THROW(q.tensor_bytes(layout.at("model.norm.weight")), Error);
}

// A type per tensor, as llama.cpp's mixes and GGUF files have them: the fused products
// (q|k|v|gate, gate|up) then span rows of several types, and of plain F32 values (v_proj kept
// F32 here), each run multiplied in its own type; the embedding is looked up from its blocks.
TEST(QuantizedWeights, FusedProductsSpanTensorsOfSeveralTypes) {
  const KernelSetGuard generic(k::KernelSet::generic);
  const ModelConfig c = config_from_json(with(base_json(), {{"tie_embeddings", false}}), "test");
  Model<float> quantised(c), dequantised(c);
  std::vector<float> params;
  init_params(params, quantised.layout(), c, 4);
  quantised.load_params(params);
  WeightFormats formats{"mixed", {}};
  for (const ParamSpec& s : quantised.layout().specs()) {
    if (!quantized_tensor(s) || s.name.find("v_proj") != std::string::npos) continue;
    const bool odd = s.name.find("k_proj") != std::string::npos || s.name.find("up_proj") != std::string::npos;
    formats.tensors.emplace(s.name, odd ? k::ElementType::q4_0 : s.kind == ParamKind::embedding ? k::ElementType::bf16
                                                                                                  : k::ElementType::q8_0);
  }
  const std::unique_ptr<QuantizedWeights> q = quantize_model(quantised, formats, /*release_f32=*/false);
  dequantised.load_params(quantised.params());
  q->release_f32();
  for (const auto& [batch, seq] : {std::pair<int64_t, int64_t>{1, 1}, {2, 7}}) {
    const std::vector<float> got = logits_of(quantised, batch, seq), want = logits_of(dequantised, batch, seq);
    EXPECT_LT(gatedlm::testing::rel_error(got, want), kExact) << batch << "x" << seq;
  }
  formats.tensors.emplace("model.layers.0.input_layernorm.weight", k::ElementType::q8_0);
  const std::string msg = gatedlm::testing::error_of([&] { QuantizedWeights bad(quantised.layout(), formats); });
  EXPECT_TRUE(gatedlm::testing::contains(msg, "input_layernorm") && gatedlm::testing::contains(msg, "stays F32")) << msg;
}

TEST(QuantizedWeights, DenseForwardMatchesDequantisedWeights) {
  for (k::ElementType f : {k::ElementType::bf16, k::ElementType::q8_0, k::ElementType::q4_0}) {
    expect_exact_forward(base_json(), f);
    expect_quantised_forward_matches(base_json(), f, kRounded);  // this CPU's own kernel set
  }
  expect_exact_forward(with(base_json(), {{"tie_embeddings", false}}), k::ElementType::q4_0);
}

TEST(QuantizedWeights, NarrowMatrixStaysF32) {  // down_proj reads 40 values a row
  expect_exact_forward(with(base_json(), {{"ffn_hidden", 40}}), k::ElementType::q4_0);
}

TEST(QuantizedWeights, GatedForwardMatchesDequantisedWeights) {
  for (const json& gate : {json{{"position", "sdpa"}, {"granularity", "elementwise"}},
                           json{{"position", "sdpa"}, {"granularity", "headwise"}},
                           json{{"position", "value"}, {"granularity", "elementwise"}}})
    expect_exact_forward(with(base_json(), {{"gate", gate}}), k::ElementType::q8_0);
}

TEST(QuantizedWeights, MoeForwardMatchesDequantisedWeights) {
  expect_exact_forward(
      with(base_json(), {{"moe", {{"n_experts", 4}, {"top_k", 2}, {"expert_hidden", 32}, {"n_shared", 1}}}}),
      k::ElementType::q4_0);
}

TEST(QuantizedWeights, SwitchHeadsForwardMatchesDequantisedWeights) {
  expect_exact_forward(with(base_json(), {{"switch_heads", {{"n_experts", 3}, {"top_k", 2}}}}), k::ElementType::q8_0);
}

// Attached where the kernel set reads them, the Q8_0 / Q4_0 blocks are arranged in tiles
// (kernels/quant_tiles.h): every view of the weights still multiplies as the rows of blocks
// do (whole tiles, a view that starts or ends inside a tile, one past the tiles), the values
// read back are the same, and the bytes are no longer handed out as GGUF's.
TEST(QuantizedWeights, TiledBlocksMultiplyAsRowsOfBlocks) {
  const ModelConfig c = config_from_json(base_json(), "test");
  for (k::ElementType format : {k::ElementType::q8_0, k::ElementType::q4_0}) {
    SCOPED_TRACE(k::element_name(format));
    Model<float> model(c);
    std::vector<float> params;
    init_params(params, model.layout(), c, 5);
    model.load_params(params);
    QuantizedWeights q(model.layout(), format);
    q.quantize_from(model.params());
    q.dequantize_into(model.params());
    // q_proj|k_proj|v_proj of layer 0 (64 + 32 + 32 rows of 64 values), as rows of blocks.
    const ParamSpec& wq = model.layout().at("model.layers.0.self_attn.q_proj.weight");
    const std::span<const uint8_t> first = std::as_const(q).tensor_bytes(wq);
    const int64_t row_bytes = k::element_row_bytes(format, 64);
    const std::vector<uint8_t> rows(first.begin(), first.begin() + 128 * row_bytes);
    const std::vector<float> values(model.params().begin(), model.params().end());
    q.attach(model);
    if (!k::quant_tiles_pay(format)) continue;  // this kernel set reads rows of blocks: no tiles to test
    EXPECT_THROW(q.tensor_bytes(wq), Error);
    std::vector<float> read_back(values.size(), std::numeric_limits<float>::quiet_NaN());
    q.dequantize_into(read_back);
    for (const ParamSpec& spec : model.layout().specs()) {
      if (!quantized_tensor(spec)) continue;
      ASSERT_TRUE(std::equal(values.begin() + spec.offset, values.begin() + spec.offset + spec.numel,
                             read_back.begin() + spec.offset))
          << spec.name;
    }
    const int64_t m = 8;
    const std::vector<float> a = gatedlm::testing::random_vector<float>(m * 64, 9, 1.0);
    for (auto [row0, n] : {std::pair<int64_t, int64_t>{0, 128}, {16, 32}, {8, 20}, {64, 64}, {100, 28}, {96, 7}}) {
      SCOPED_TRACE(::testing::Message() << "rows [" << row0 << ", " << row0 + n << ")");
      std::vector<float> got(static_cast<size_t>(m * n)), want(got.size());
      k::MatmulShape shape{m, n, 64};
      shape.trans_b = true;
      const k::Weight<float> view = q.weight(model.params().data() + wq.offset + row0 * 64);
      ASSERT_EQ(view.type(), format);
      k::matmul(got.data(), a.data(), view, shape);
      k::quant_matmul(want.data(), a.data(), m, k::QuantWeights{format, rows.data() + row0 * row_bytes, n, 64});
      EXPECT_EQ(got, want);  // 8 rows against whole tiles: the same arithmetic in either layout
    }
  }
}

// The weight views carry their type: a quantised matrix's view holds its rows of blocks
// (any row of a tensor, the first row of the next tensor of the segment), a norm's and the
// router's stay F32, and a view further on through at() finds the later tensor's rows.
TEST(QuantizedWeights, ViewsCarryTheirTypeAndRows) {
  const ModelConfig c = config_from_json(with(base_json(), {{"moe", {{"n_experts", 4}, {"top_k", 2},
                                                                     {"expert_hidden", 32}}}}), "test");
  Model<float> model(c);
  QuantizedWeights q(model.layout(), k::ElementType::q8_0);
  q.attach(model);
  const float* base = model.params().data();
  const ParamLayout& layout = model.layout();
  const ParamSpec& wq = layout.at("model.layers.0.self_attn.q_proj.weight");
  const ParamSpec& wk = layout.at("model.layers.0.self_attn.k_proj.weight");
  EXPECT_EQ(q.weight(base + wq.offset).type(), k::ElementType::q8_0);
  EXPECT_EQ(q.weight(base + wq.offset + 5 * 64).stored.row0 + 0, q.weight(base + wq.offset).stored.row0 + 5);
  EXPECT_EQ(q.weight(base + wk.offset).stored.matrix.data, q.weight(base + wq.offset).stored.matrix.data)
      << "q_proj and k_proj are one segment of rows (the fused product reads both)";
  EXPECT_EQ(q.weight(base + wk.offset).stored.row0, wq.shape[0]);
  EXPECT_EQ(q.weight(base + layout.at("model.layers.0.input_layernorm.weight").offset).type(), k::ElementType::f32);
  EXPECT_EQ(q.weight(base + layout.at("model.layers.0.mlp.gate.weight").offset).type(), k::ElementType::f32);
  EXPECT_THROW(q.weight(base + wq.offset + 3), Error) << "a view that starts inside a row";
  // Expert 2's down_proj from expert 0's gate_proj, as the MoE block finds it.
  const ParamSpec& e0 = layout.at("model.layers.0.mlp.experts.0.gate_proj.weight");
  const ParamSpec& down2 = layout.at("model.layers.0.mlp.experts.2.down_proj.weight");
  const k::Weight<float> found = q.weight(base + e0.offset).at(down2.offset - e0.offset);
  const k::Weight<float> direct = q.weight(base + down2.offset);
  EXPECT_EQ(found.values, direct.values);
  EXPECT_EQ(found.stored.matrix.data, direct.stored.matrix.data);
  EXPECT_EQ(found.stored.row0, direct.stored.row0);
  EXPECT_EQ(found.stored.matrix.cols, 32);
  q.detach();
  EXPECT_EQ(q.weight(base + wq.offset).type(), k::ElementType::f32) << "detached: no store, plain values";
}

// A stored weight is multiplied as whole rows, transposed; any other view of it is
// refused, naming what was asked, rather than read from fp32 pages that may be gone.
TEST(QuantizedWeights, StoredWeightRefusesOtherShapes) {
  const ModelConfig c = config_from_json(base_json(), "test");
  Model<float> model(c);
  QuantizedWeights q(model.layout(), k::ElementType::q8_0);
  q.attach(model);
  const k::Weight<float> w = q.weight(model.params().data() + model.layout().at("model.layers.0.mlp.down_proj.weight").offset);
  ASSERT_TRUE(w.is_stored());
  std::vector<float> a(4 * 96, 0.5f), out(4 * 96);
  k::MatmulShape not_transposed{4, 96, 64};
  try {
    k::matmul(out.data(), a.data(), w, not_transposed);
    FAIL() << "a product of a stored weight not transposed ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("B not transposed"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("q8_0"), std::string::npos) << e.what();
  }
  k::MatmulShape past_the_rows{4, 200, 96};
  past_the_rows.trans_b = true;
  EXPECT_THROW(k::matmul(out.data(), a.data(), w, past_the_rows), Error);
}

// Any number of models, in any mix of types, in one process: twelve models (more than the
// eight the old address registry held) of F32, BF16, Q8_0 and Q4_0 weights, all alive and
// attached at once, each give the logits it gives alone, bit for bit.
TEST(QuantizedWeights, ModelsOfAnyTypesShareAProcess) {
  const ModelConfig c = config_from_json(base_json(), "test");
  const k::ElementType types[] = {k::ElementType::f32, k::ElementType::bf16, k::ElementType::q8_0,
                                  k::ElementType::q4_0};
  auto make = [&](int i, std::unique_ptr<QuantizedWeights>& q) {
    auto m = std::make_unique<Model<float>>(c);
    std::vector<float> params;
    init_params(params, m->layout(), c, 10 + i);
    m->load_params(params);
    if (types[i % 4] != k::ElementType::f32) q = quantize_model(*m, types[i % 4], /*release_f32=*/true);
    return m;
  };
  std::vector<std::vector<float>> alone;
  for (int i = 0; i < 12; ++i) {
    std::unique_ptr<QuantizedWeights> q;
    std::unique_ptr<Model<float>> m = make(i, q);
    alone.push_back(logits_of(*m, 1, 6));
    q.reset();  // detached while the model lives
  }
  std::vector<std::unique_ptr<Model<float>>> models(12);
  std::vector<std::unique_ptr<QuantizedWeights>> stores(12);
  for (int i = 0; i < 12; ++i) models[i] = make(i, stores[i]);
  for (int i = 11; i >= 0; --i) {  // in another order than they were made
    SCOPED_TRACE(::testing::Message() << "model " << i << ", " << k::element_name(types[i % 4]));
    EXPECT_EQ(logits_of(*models[i], 1, 6), alone[i]);
  }
}

}  // namespace
}  // namespace gatedlm::model
