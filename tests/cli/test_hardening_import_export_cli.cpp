// Issue 28, rows 5-9 and the GGUF vocabulary, through the binary: import and export meet
// hostile Hugging Face directories and tokenizer.json files with a message that names the
// file, key or tensor, and write nothing; a GGUF export always carries a vocabulary.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_checkpoint.h"
#include "cli_runner.h"
#include "expect_refused.h"
#include "test_files.h"

namespace gatedlm::testing {
namespace {

using nlohmann::json;

// Ungated and bias-free, so that every format (qwen3, gguf) can hold it.
json tiny_config() {
  return json{{"vocab_size", 258}, {"d_model", 16}, {"n_layers", 2},    {"n_heads", 2},
              {"n_kv_heads", 1},   {"head_dim", 8}, {"ffn_hidden", 32}, {"max_seq_len", 32}};
}

// dir/hf: the tiny checkpoint as a Hugging Face (qwen3, F32) directory.
fs::path make_hf_dir(const TempDir& dir) {
  const fs::path ck = make_checkpoint(dir, "ck", tiny_config());
  const CliResult r = run_gatedlm({"export", ck.string(), "--format", "qwen3", "--out", (dir / "hf").string()});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return dir / "hf";
}

// Nothing written: the output directory is absent or empty.
void expect_nothing_written(const fs::path& out) {
  EXPECT_TRUE(!fs::exists(out) || fs::is_empty(out)) << out << " was written";
}

// Sets element `index` of tensor `name` of an F32 safetensors file to `value`.
void poke_f32(const fs::path& file, const std::string& name, int64_t index, float value) {
  std::string bytes = read_file(file);
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  const json header = json::parse(bytes.substr(8, header_len));
  ASSERT_EQ(header.at(name).at("dtype"), "F32");
  const size_t at = 8 + header_len + header.at(name).at("data_offsets").at(0).get<size_t>() + 4 * index;
  std::memcpy(bytes.data() + at, &value, 4);
  write_file(file, bytes);
}

std::vector<std::string> gguf_export(const fs::path& ck, const fs::path& out) {
  return {"export", ck.string(), "--format", "gguf", "--out", out.string()};
}

TEST(HardeningImportExport, GgufExportReadsTokenizerJsonThroughTheCheckedLoader) {
  TempDir dir("harden_gguf_tok");
  const fs::path ck = make_checkpoint(dir, "ck", tiny_config());
  const char* bad[] = {"[]", R"({"model": []})", R"({"model": {"type": "BPE", "vocab": 5}})",
                       R"({"pre_tokenizer": {"type": "ByteLevel"}, "model": {"type": "BPE", "vocab": {"a": "0"},
                           "merges": []}, "added_tokens": []})"};
  int i = 0;
  for (const char* tokenizer : bad) {
    SCOPED_TRACE(tokenizer);
    write_file(ck / "tokenizer.json", tokenizer);
    const fs::path out = dir / ("gguf" + std::to_string(i++));
    const CliResult r = expect_refused(gguf_export(ck, out), {(ck / "tokenizer.json").string()});
    EXPECT_EQ(r.exit_code, 1) << r.output;
    expect_nothing_written(out);
  }
}

bool holds(const std::string& bytes, const std::string& key) { return bytes.find(key) != std::string::npos; }

TEST(HardeningImportExport, GgufExportWithoutTokenizerJsonCarriesTheByteVocabulary) {
  TempDir dir("harden_gguf_byte");
  const fs::path ck = make_checkpoint(dir, "ck", tiny_config());
  const CliResult r = run_gatedlm(gguf_export(ck, dir / "gguf"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string gguf = read_file(dir / "gguf" / "model.gguf");
  for (const char* key : {"qwen3.vocab_size", "tokenizer.ggml.tokens", "tokenizer.ggml.merges", "gpt2"})
    EXPECT_TRUE(holds(gguf, key)) << key;
  EXPECT_FALSE(holds(gguf, "no_vocab"));
  // A model whose vocabulary is not the byte tokenizer's needs its tokenizer.json.
  json big = tiny_config();
  big["vocab_size"] = 300;
  const fs::path ck300 = make_checkpoint(dir, "ck300", big);
  expect_refused(gguf_export(ck300, dir / "gguf300"), {"tokenizer.json", "300", "258"});
  expect_nothing_written(dir / "gguf300");
}

TEST(HardeningImportExport, ImportChecksTokenizerJsonBeforeWriting) {
  TempDir dir("harden_import_tok");
  const fs::path hf = make_hf_dir(dir);
  std::string noise(4096, '\0');
  for (size_t i = 0; i < noise.size(); ++i) noise[i] = static_cast<char>((i * 2654435761u) >> 13);
  const std::string nested(100000, '[');
  int i = 0;
  for (const std::string& tokenizer : {noise, nested}) {
    write_file(hf / "tokenizer.json", tokenizer);
    const fs::path out = dir / ("out" + std::to_string(i++));
    expect_refused({"import", hf.string(), "--out", out.string()}, {(hf / "tokenizer.json").string()});
    expect_nothing_written(out);
  }
}

TEST(HardeningImportExport, ImportRefusesNonFiniteWeightsNamingTensorAndElement) {
  TempDir dir("harden_import_nan");
  const fs::path hf = make_hf_dir(dir);
  const std::string tensor = "model.layers.1.mlp.down_proj.weight";
  int i = 0;
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
    poke_f32(hf / "model.safetensors", tensor, 5, bad);
    const fs::path out = dir / ("out" + std::to_string(i++));
    expect_refused({"import", hf.string(), "--out", out.string()}, {tensor, "element 5"});
    expect_nothing_written(out);
  }
}

TEST(HardeningImportExport, ImportFindsMissingLayersFromTheHeadersAtOnce) {
  TempDir dir("harden_import_layers");
  const fs::path hf = make_hf_dir(dir);
  json config = json::parse(read_file(hf / "config.json"));
  config["num_hidden_layers"] = 1000000;
  write_file(hf / "config.json", config.dump());
  const auto start = std::chrono::steady_clock::now();
  expect_refused({"import", hf.string(), "--out", (dir / "out").string()}, {"model.layers.2.", "1000000"});
  // Before the fix: a layout of 10^6 layers, over a minute and gigabytes before the refusal.
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 30.0);
  expect_nothing_written(dir / "out");
}

TEST(HardeningImportExport, ImportRefusesADuplicateConfigKey) {
  TempDir dir("harden_import_dup");
  const fs::path hf = make_hf_dir(dir);
  std::string text = read_file(hf / "config.json");
  text.insert(text.find('{') + 1, "\"rope_theta\": 500000.0,");
  write_file(hf / "config.json", text);
  expect_refused({"import", hf.string(), "--out", (dir / "out").string()}, {"rope_theta", "twice", "config.json"});
  expect_nothing_written(dir / "out");
}

TEST(HardeningImportExport, MoeEveryZeroIsBlamedOnEvery) {
  TempDir dir("harden_moe_every");
  json config = tiny_config();
  config["ffn_hidden"] = 0;
  config["moe"] = {{"n_experts", 4}, {"top_k", 2}, {"expert_hidden", 16}, {"every", 0}};
  write_file(dir / "moe.json", config.dump());
  const CliResult r =
      expect_refused({"init", "--config", (dir / "moe.json").string(), "--out", (dir / "ck").string()}, {"every"});
  EXPECT_FALSE(contains(r.output, "ffn_hidden")) << r.output;
}

}  // namespace
}  // namespace gatedlm::testing
