// gatedlm export --format gguf through the binary: --dtype takes GGUF's types (and only the
// Hugging Face formats' own without gguf), a quantised file says its llama.cpp file type, and
// a gated model is refused naming the gate, with nothing written; --gguf-arch names the
// architecture.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli_checkpoint.h"
#include "cli_runner.h"
#include "expect_refused.h"
#include "gguf_test_reader.h"
#include "test_files.h"

namespace gatedlm::testing {
namespace {

using nlohmann::json;

json config(const json& extra = json::object()) {
  json j{{"vocab_size", 258}, {"d_model", 32}, {"n_layers", 1},    {"n_heads", 2},
         {"n_kv_heads", 1},   {"head_dim", 16}, {"ffn_hidden", 64}, {"max_seq_len", 32}};
  j.update(extra);
  return j;
}

TEST(GgufExportCli, DtypeTakesGgufTypesAndTheFileSaysWhich) {
  TempDir dir("gguf_dtype_cli");
  const fs::path ck = make_checkpoint(dir, "ck", config());
  const fs::path out = dir / "q8";
  const CliResult r = run_gatedlm({"export", ck.string(), "--format", "gguf", "--dtype", "q8_0", "--out", out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const GgufTestFile f = read_gguf_for_test((out / "model.gguf").string());
  EXPECT_EQ(std::get<uint32_t>(f.metadata.at("general.file_type")), 7u);  // LLAMA_FTYPE_MOSTLY_Q8_0
  EXPECT_EQ(f.tensors.at("blk.0.ffn_up.weight").type, 8u);                // GGML_TYPE_Q8_0
  EXPECT_EQ(f.tensors.at("blk.0.attn_norm.weight").type, 0u);

  expect_refused({"export", ck.string(), "--format", "gguf", "--dtype", "iq2_xxs", "--out", (dir / "a").string()},
                 {"--dtype", "iq2_xxs", "q4_0", "q6_k"});
  EXPECT_FALSE(fs::exists(dir / "a"));
  expect_refused({"export", ck.string(), "--format", "qwen3", "--dtype", "q8_0", "--out", (dir / "b").string()},
                 {"--dtype", "q8_0"});
  EXPECT_FALSE(fs::exists(dir / "b"));
}

TEST(GgufExportCli, GatedModelsAreRefusedWithTheReason) {
  TempDir dir("gguf_gated_cli");
  const json g1{{"position", "sdpa"}, {"granularity", "elementwise"}, {"activation", "sigmoid"}};
  const fs::path ck = make_checkpoint(dir, "g1", config({{"gate", g1}}));
  expect_refused({"export", ck.string(), "--format", "gguf", "--out", (dir / "g1_out").string()},
                 {"\"gate\"", "all full attention", "GGML_ASSERT"});
  EXPECT_FALSE(fs::exists(dir / "g1_out"));
  const fs::path headwise = make_checkpoint(dir, "hw", config({{"gate", {{"position", "sdpa"}, {"granularity", "headwise"}}}}));
  expect_refused({"export", headwise.string(), "--format", "gguf", "--out", (dir / "hw_out").string()},
                 {"gate.granularity", "headwise", "no llama.cpp form"});
  EXPECT_FALSE(fs::exists(dir / "hw_out"));
}

// --gguf-arch qwen3next: a G1-gated hybrid MoE model is written as llama.cpp's qwen3next
// (beta and alpha fused into ssm_ba, no M-RoPE sections) and `gatedlm import` gives its
// config back; an architecture the model does not fit, an unknown one, or the flag without
// --format gguf is refused naming the flag, with nothing written.
TEST(GgufExportCli, GgufArchWritesQwen3NextAndRefusesWhatDoesNotFit) {
  TempDir dir("gguf_arch_cli");
  const json hybrid = config({{"n_layers", 2}, {"ffn_hidden", 0}, {"full_attention_interval", 2}, {"rope_dims", 8},
                              {"gate", {{"position", "sdpa"}}},
                              {"linear_attention", {{"n_k_heads", 1}, {"n_v_heads", 2}, {"k_head_dim", 8}, {"v_head_dim", 8}}},
                              {"moe", {{"n_experts", 4}, {"top_k", 2}, {"expert_hidden", 16}, {"n_shared", 1}}}});
  const fs::path ck = make_checkpoint(dir, "hy", hybrid);
  const fs::path out = dir / "next";
  CliResult r = run_gatedlm({"export", ck.string(), "--format", "gguf", "--gguf-arch", "qwen3next", "--out", out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("qwen3next"), std::string::npos) << r.output;
  const GgufTestFile f = read_gguf_for_test((out / "model.gguf").string());
  EXPECT_EQ(f.architecture, "qwen3next");
  EXPECT_TRUE(f.tensors.count("blk.0.ssm_ba.weight"));
  EXPECT_FALSE(f.tensors.count("blk.0.ssm_beta.weight"));
  EXPECT_FALSE(f.metadata.count("qwen3next.rope.dimension_sections"));
  r = run_gatedlm({"import", (out / "model.gguf").string(), "--out", (dir / "back").string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(json::parse(read_file(dir / "back" / "config.json")), json::parse(read_file(ck / "config.json")));

  const fs::path dense = make_checkpoint(dir, "dense", config({{"n_layers", 2}, {"full_attention_interval", 2},
                                                               {"gate", {{"position", "sdpa"}}},
                                                               {"linear_attention", hybrid["linear_attention"]}}));
  expect_refused({"export", dense.string(), "--format", "gguf", "--gguf-arch", "qwen3next", "--out", (dir / "a").string()},
                 {"--gguf-arch qwen3next", "zero experts"});
  expect_refused({"export", ck.string(), "--format", "gguf", "--gguf-arch", "llama", "--out", (dir / "a").string()},
                 {"--gguf-arch llama", "unknown"});
  expect_refused({"export", ck.string(), "--format", "paper", "--gguf-arch", "qwen3next", "--out", (dir / "a").string()},
                 {"--gguf-arch", "--format gguf"});
  EXPECT_FALSE(fs::exists(dir / "a"));
}

}  // namespace
}  // namespace gatedlm::testing
