// gatedlm export --format gguf through the binary: --dtype takes GGUF's types (and only the
// Hugging Face formats' own without gguf), a quantised file says its llama.cpp file type, and
// a gated model is refused naming the gate, with nothing written.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

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

fs::path make_checkpoint(const TempDir& dir, const std::string& name, const json& c) {
  write_file(dir / (name + ".json"), c.dump());
  const CliResult r = run_gatedlm({"init", "--config", (dir / (name + ".json")).string(), "--out", (dir / name).string()});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return dir / name;
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

  expect_refused({"export", ck.string(), "--format", "gguf", "--dtype", "q5_0", "--out", (dir / "a").string()},
                 {"--dtype", "q5_0", "q4_0"});
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

}  // namespace
}  // namespace gatedlm::testing
