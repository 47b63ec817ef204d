// A quantised GGUF file runs on its blocks (io/gguf_blocks.h): the loader keeps each
// quantised tensor in the file's type, and the model gives the logits of the same weights
// expanded to F32 (import_gguf), in fp32 summation order in the generic kernel set. The
// fp32 pages of the stored tensors, the embedding's included, are given back. F32 / F16
// tensors are expanded, as are the parameters of a file written as F32.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/rng.h"
#include "io/checkpoint.h"
#include "io/gguf.h"
#include "io/gguf_import.h"
#include "io/gguf_reader.h"
#include "io/model_loader.h"
#include "io_fixtures.h"
#include "kernels/kernel_set.h"
#include "model/quantized_weights.h"
#include "model/weight_recipes.h"
#include "test_files.h"
#include "kernel_set_guard.h"
#include "test_util.h"

namespace gatedlm::io {
namespace {

using nlohmann::json;
using testing::random_checkpoint;
using testing::TempDir;
namespace k = kernels;
using gatedlm::testing::KernelSetGuard;

// Rows of 256 values: every matrix is a whole number of the K-quants' super-blocks.
json superblock_config() {
  return json{{"vocab_size", kByteVocabularySize}, {"d_model", 256}, {"n_layers", 2}, {"n_heads", 4},
              {"n_kv_heads", 2}, {"head_dim", 64}, {"ffn_hidden", 512}, {"max_seq_len", 64}};
}

// A hybrid of two key heads and four value heads (ssm_out's columns hold the value heads).
json hybrid_config() {
  return json{{"vocab_size", kByteVocabularySize}, {"d_model", 64}, {"n_layers", 2}, {"n_heads", 4},
              {"n_kv_heads", 2}, {"head_dim", 16}, {"ffn_hidden", 96}, {"max_seq_len", 64},
              {"norm_zero_centered", true},
              {"gate", {{"position", "sdpa"}, {"granularity", "elementwise"}, {"activation", "sigmoid"}}},
              {"full_attention_interval", 2},
              {"linear_attention", {{"n_k_heads", 2}, {"n_v_heads", 4}, {"k_head_dim", 16}, {"v_head_dim", 16}}}};
}

std::vector<float> logits_of(model::Model<float>& m, int64_t seq) {
  std::vector<int32_t> tokens(seq);
  Rng rng(11);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng.below(m.config().vocab_size));
  m.forward(tokens.data(), nullptr, 1, seq);
  return {m.logits(), m.logits() + seq * m.config().vocab_size};
}

// Loads `path` with its blocks and as F32, and compares them; returns the loaded model.
LoadedModel expect_runs_on_blocks(const std::string& path) {
  LoadedModel m = load_model(path);
  EXPECT_EQ(m.kind, ModelFileKind::gguf_file);
  if (!m.quantized) {
    ADD_FAILURE() << path << ": no blocks kept";
    return m;
  }
  const ImportedGguf expanded = import_gguf(path);
  model::Model<float> reference(expanded.checkpoint.config);
  reference.load_params(expanded.checkpoint.params);
  const model::ParamSpec& embed = m.model->layout().at("model.embed_tokens.weight");
  EXPECT_EQ(m.model->params()[embed.offset + 3], 0.0f) << "the embedding's fp32 pages are given back";
  EXPECT_NE(reference.params()[embed.offset + 3], 0.0f);
  for (const int64_t seq : {1, 5, 40})
    EXPECT_LT(testing::rel_error(logits_of(*m.model, seq), logits_of(reference, seq)), 1e-5) << "seq " << seq;
  return m;
}

TEST(GgufBlocks, EveryQuantisedMatrixStaysInTheFilesType) {
  const KernelSetGuard generic(k::KernelSet::generic);
  const TempDir dir("gguf_blocks_dense");
  const Checkpoint ck = random_checkpoint(superblock_config(), 3);
  struct Want {
    k::ElementType dtype;
    const char* name;  // the weights' name, from general.file_type
  };
  for (const Want& want : {Want{k::ElementType::q4_k, "q4_k_s"}, Want{k::ElementType::q6_k, "q6_k"},
                           Want{k::ElementType::iq4_xs, "iq4_xs"}, Want{k::ElementType::q8_0, "q8_0"},
                           Want{k::ElementType::q5_1, "q5_1"}, Want{k::ElementType::bf16, "bf16"}}) {
    SCOPED_TRACE(k::element_name(want.dtype));
    const std::string path = (dir / (std::string(k::element_name(want.dtype)) + ".gguf")).string();
    export_gguf(ck, want.dtype, kByteVocabulary, path);
    const LoadedModel m = expect_runs_on_blocks(path);
    ASSERT_NE(m.quantized, nullptr);
    EXPECT_EQ(m.weight_format(), want.name);
    int64_t matrices = 0, f32_bytes = 0;
    for (const model::ParamSpec& s : m.model->layout().specs()) {
      if (!model::quantized_tensor(s)) continue;
      ++matrices;
      f32_bytes += s.numel * 4;
      EXPECT_EQ(m.quantized->formats().of(s), want.dtype) << s.name;
    }
    EXPECT_EQ(static_cast<int64_t>(m.quantized->formats().tensors.size()), matrices);
    const double bits = 32.0 * static_cast<double>(m.quantized->bytes()) / static_cast<double>(f32_bytes);
    const double want_bits = 8.0 * k::element_traits(want.dtype).block_bytes / k::element_traits(want.dtype).block_values;
    EXPECT_NEAR(bits, want_bits, 1e-9) << "the blocks as the file holds them, nothing more";
  }
}

// A Q4_K_M file: q|k in Q4_K and some v in Q6_K, so the fused products run over rows of two
// types; each parameter keeps its tensor's type.
TEST(GgufBlocks, AMixKeepsEachTensorsType) {
  const KernelSetGuard generic(k::KernelSet::generic);
  const TempDir dir("gguf_blocks_mix");
  const Checkpoint ck = random_checkpoint(superblock_config(), 9);
  const std::string path = (dir / "q4_k_m.gguf").string();
  export_gguf(ck, *model::find_recipe("q4_k_m"), kByteVocabulary, path);
  const LoadedModel m = expect_runs_on_blocks(path);
  ASSERT_NE(m.quantized, nullptr);
  EXPECT_EQ(m.weight_format(), "q4_k_m");
  const model::WeightFormats& f = m.quantized->formats();
  // use_more_bits(l, 2) holds for layer 1 only (as llama-quantize writes this model).
  EXPECT_EQ(f.tensors.at("model.layers.0.self_attn.v_proj.weight"), k::ElementType::q4_k);
  EXPECT_EQ(f.tensors.at("model.layers.1.self_attn.v_proj.weight"), k::ElementType::q6_k);
  EXPECT_EQ(f.tensors.at("model.layers.1.mlp.down_proj.weight"), k::ElementType::q6_k);
  EXPECT_EQ(f.tensors.at("model.layers.1.self_attn.k_proj.weight"), k::ElementType::q4_k);
  EXPECT_EQ(f.tensors.at("lm_head.weight"), k::ElementType::q6_k);
  EXPECT_EQ(f.tensors.at("model.embed_tokens.weight"), k::ElementType::q4_k);
}

// A hybrid with more value heads than key heads: qwen35 tiles them, qwen3next groups them;
// either file imports in its own order (model/value_heads.h), so every matrix stays in
// blocks, ssm_out (value heads along its rows) included, and runs as the expanded model.
TEST(GgufBlocks, AHybridKeepsEveryMatrixInItsFilesOrder) {
  const KernelSetGuard generic(k::KernelSet::generic);
  const TempDir dir("gguf_blocks_hybrid");
  const Checkpoint ck = random_checkpoint(hybrid_config(), 5);
  for (const char* arch : {"qwen35", "qwen3next"}) {
    SCOPED_TRACE(arch);
    Checkpoint written = ck;
    if (std::string(arch) == "qwen3next") {  // qwen3next holds MoE layers only
      json moe = hybrid_config();
      moe["ffn_hidden"] = 0;
      moe["moe"] = {{"n_experts", 2}, {"top_k", 1}, {"expert_hidden", 32}, {"n_shared", 1}, {"shared_hidden", 32}};
      written = random_checkpoint(moe, 5);
    }
    const std::string path = (dir / (std::string(arch) + "_q8_0.gguf")).string();
    export_gguf(written, k::ElementType::q8_0, kByteVocabulary, path, arch);
    const LoadedModel m = expect_runs_on_blocks(path);
    ASSERT_NE(m.quantized, nullptr);
    EXPECT_EQ(m.model->config().linear_attention.value_head_order,
              std::string(arch) == "qwen35" ? model::ValueHeadOrder::tiled : model::ValueHeadOrder::grouped);
    for (const model::ParamSpec& s : m.model->layout().specs()) {
      if (model::quantized_tensor(s)) {
        EXPECT_EQ(m.quantized->formats().of(s), k::ElementType::q8_0) << s.name;
      }
    }
    EXPECT_EQ(m.quantized->formats().tensors.count("model.layers.0.linear_attn.out_proj.weight"), 1u);
  }
  const std::string f32_path = (dir / "hybrid_f32.gguf").string();
  export_gguf(ck, k::ElementType::f32, kByteVocabulary, f32_path, "qwen35");
  EXPECT_EQ(load_model(f32_path).quantized, nullptr) << "F32 weights have no blocks to keep";
}

// A NaN in a block's fp16 scale is refused when the blocks are kept (loading, and import,
// which then writes nothing), naming the file, the tensor and the row.
TEST(GgufBlocks, ANonFiniteScaleIsRefusedByName) {
  const TempDir dir("gguf_blocks_nan");
  const std::string path = (dir / "q4_k.gguf").string();
  export_gguf(random_checkpoint(superblock_config(), 8), k::ElementType::q4_k, kByteVocabulary, path);
  uint64_t offset = 0, row_bytes = 0;
  {
    const GgufReader r(path);
    const GgufTensorInfo* t = r.find_tensor("blk.1.attn_k.weight");
    ASSERT_NE(t, nullptr);
    ASSERT_EQ(t->type, static_cast<uint32_t>(k::ElementType::q4_k));
    offset = t->offset;
    row_bytes = t->bytes / static_cast<uint64_t>(t->shape[0]);
  }
  std::string bytes = testing::read_file(path);
  const uint16_t nan = 0x7E00;  // fp16 NaN, as the d of row 3's first super-block
  std::memcpy(bytes.data() + offset + 3 * row_bytes, &nan, 2);
  testing::write_file(path, bytes);
  const std::string loaded = testing::error_of([&] { (void)load_model(path); });
  for (const char* part : {path.c_str(), "blk.1.attn_k.weight", "row 3"})
    EXPECT_TRUE(testing::contains(loaded, part)) << part << " missing in: " << loaded;
  const std::string expanded = testing::error_of([&] { (void)import_gguf(path); });
  EXPECT_TRUE(testing::contains(expanded, "blk.1.attn_k.weight")) << expanded;
}

TEST(GgufBlocks, AnalysisKeepsTheDequantisedValuesReadable) {
  const TempDir dir("gguf_blocks_values");
  const Checkpoint ck = random_checkpoint(superblock_config(), 7);
  const std::string path = (dir / "q4_k.gguf").string();
  export_gguf(ck, k::ElementType::q4_k, kByteVocabulary, path);
  ModelLoadOptions keep;
  keep.release_f32 = false;
  const LoadedModel m = load_model(path, keep);
  const ImportedGguf expanded = import_gguf(path);
  ASSERT_EQ(m.model->params().size(), expanded.checkpoint.params.size());
  EXPECT_TRUE(std::equal(expanded.checkpoint.params.begin(), expanded.checkpoint.params.end(), m.model->params().begin()))
      << "the buffer holds the blocks' values, bit for bit what import gives";
}

}  // namespace
}  // namespace gatedlm::io
