// gatedlm import FILE.gguf through the binary: --format auto knows a GGUF file by its magic,
// export --format gguf then import gives back the checkpoint byte for byte (weights and
// config) with its tokenizer.json, and every refusal (not GGUF, a truncated file, a
// vocabulary the loader cannot take, an output that exists) writes nothing. A quantised file
// is imported with its types (a quantised checkpoint that scores as the file does), or
// expanded to F32 with --dtype f32.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli_runner.h"
#include "small_tokenizer_json.h"
#include "expect_refused.h"
#include "test_files.h"

namespace gatedlm::testing {
namespace {

using nlohmann::json;

class GgufImportCli : public ::testing::Test {
 protected:
  GgufImportCli() : dir_("gguf_import_cli") {
    const json config{{"vocab_size", 32}, {"d_model", 16}, {"n_layers", 2},    {"n_heads", 2},
                      {"n_kv_heads", 1},  {"head_dim", 8}, {"ffn_hidden", 32}, {"max_seq_len", 32}};
    write_file(dir_ / "config.json", config.dump());
    CliResult r = run_gatedlm({"init", "--config", (dir_ / "config.json").string(), "--out", (dir_ / "ck").string()});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    write_file(dir_ / "ck" / "tokenizer.json", small_tokenizer().dump());
    r = run_gatedlm({"export", (dir_ / "ck").string(), "--format", "gguf", "--out", (dir_ / "gguf").string()});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    gguf_ = dir_ / "gguf" / "model.gguf";
  }
  TempDir dir_;
  fs::path gguf_;
};

TEST_F(GgufImportCli, AutoDetectsGgufAndRoundTripsByteForByte) {
  const fs::path back = dir_ / "back";
  const CliResult r = run_gatedlm({"import", gguf_.string(), "--out", back.string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "GGUF qwen3")) << r.output;
  EXPECT_EQ(read_file(back / "model.safetensors"), read_file(dir_ / "ck" / "model.safetensors"));
  EXPECT_EQ(json::parse(read_file(back / "config.json")), json::parse(read_file(dir_ / "ck" / "config.json")));
  ASSERT_TRUE(fs::exists(back / "tokenizer.json"));
  const std::string text = "abbaab<x>cab<|endoftext|>hacafe";  // letters a-h only: the vocabulary has no space
  const CliResult ours = run_gatedlm({"tokenizer", "encode", "--tokenizer", (back / "tokenizer.json").string(), "--text", text});
  const CliResult original =
      run_gatedlm({"tokenizer", "encode", "--tokenizer", (dir_ / "ck" / "tokenizer.json").string(), "--text", text});
  ASSERT_EQ(original.exit_code, 0) << original.output;
  EXPECT_EQ(ours.output, original.output);
}

TEST_F(GgufImportCli, RefusalsWriteNothing) {
  const fs::path out = dir_ / "out";
  expect_refused({"import", (dir_ / "ck" / "config.json").string(), "--format", "gguf", "--out", out.string()},
                 {"config.json", "not a GGUF file"});
  EXPECT_FALSE(fs::exists(out));
  const std::string bytes = read_file(gguf_);
  write_file(dir_ / "cut.gguf", bytes.substr(0, bytes.size() - 100));
  expect_refused({"import", (dir_ / "cut.gguf").string(), "--out", out.string()}, {"cut.gguf", "past the end"});
  EXPECT_FALSE(fs::exists(out));
  // The vocabulary is checked after the weights' headers: still before anything is written.
  std::string renamed = bytes;
  const size_t at = renamed.find("qwen2");
  ASSERT_NE(at, std::string::npos);
  renamed.replace(at, 5, "qwenX");
  write_file(dir_ / "pre.gguf", renamed);
  expect_refused({"import", (dir_ / "pre.gguf").string(), "--out", out.string()}, {"pre.gguf", "tokenizer.ggml.pre", "qwenX"});
  EXPECT_FALSE(fs::exists(out));
  fs::create_directories(out);
  write_file(out / "keep.txt", "x");
  expect_refused({"import", gguf_.string(), "--out", out.string()}, {"not an empty directory"});
  EXPECT_EQ(read_file(out / "keep.txt"), "x");
}

// A Q8_0 file's matrices stay Q8_0 in the checkpoint import writes; the checkpoint then
// scores exactly what the file does; --dtype f32 writes an F32 checkpoint instead.
TEST_F(GgufImportCli, QuantisedTensorsKeepTheirTypes) {
  const json config{{"vocab_size", 32}, {"d_model", 64}, {"n_layers", 2},    {"n_heads", 4},
                    {"n_kv_heads", 2},  {"head_dim", 16}, {"ffn_hidden", 64}, {"max_seq_len", 32}};
  write_file(dir_ / "wide.json", config.dump());
  ASSERT_EQ(run_gatedlm({"init", "--config", (dir_ / "wide.json").string(), "--out", (dir_ / "wide").string()}).exit_code, 0);
  write_file(dir_ / "wide" / "tokenizer.json", small_tokenizer().dump());
  CliResult r = run_gatedlm({"export", (dir_ / "wide").string(), "--format", "gguf", "--dtype", "q8_0", "--out",
                             (dir_ / "q8").string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const fs::path file = dir_ / "q8" / "model.gguf", kept = dir_ / "kept", expanded = dir_ / "expanded";
  r = run_gatedlm({"import", file.string(), "--out", kept.string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "weights q8_0: ") && contains(r.output, "in their blocks")) << r.output;
  const json meta = json::parse(safetensors_header_text(kept / "model.safetensors"))["__metadata__"];
  EXPECT_EQ(meta["gatedlm.quantized"], "q8_0");
  const json formats = json::parse(meta["gatedlm.tensor_formats"].get<std::string>());
  for (const char* name : {"model.embed_tokens.weight", "model.layers.1.self_attn.q_proj.weight", "model.layers.0.mlp.down_proj.weight"})
    EXPECT_EQ(formats[name], "q8_0") << name;
  EXPECT_FALSE(formats.contains("model.layers.0.input_layernorm.weight"));

  write_file(dir_ / "ids.txt", "1 5 9 3 7 2 30 11 4 4 8 21 17\n");
  auto score = [&](const fs::path& model) {
    const CliResult g = run_gatedlm({"score", "--checkpoint", model.string(), "--token-ids", (dir_ / "ids.txt").string(),
                                     "--logprobs", "--json"});
    EXPECT_EQ(g.exit_code, 0) << g.output;
    return json::parse(g.output.substr(g.output.find('{')))["logprobs"][0];
  };
  const json from_file = score(file);
  ASSERT_TRUE(from_file.is_array() && from_file.size() >= 12) << from_file.dump();
  EXPECT_EQ(score(kept), from_file) << "the same blocks, the same products";

  r = run_gatedlm({"import", file.string(), "--out", expanded.string(), "--dtype", "f32"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(json::parse(safetensors_header_text(expanded / "model.safetensors"))["__metadata__"].contains("gatedlm.quantized"));
  EXPECT_TRUE(contains(r.output, "weights F32")) << r.output;
}

}  // namespace
}  // namespace gatedlm::testing
