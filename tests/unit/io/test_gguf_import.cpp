// GGUF import (io/gguf_import.h) of what GGUF export writes: a dense qwen3 and an MoE
// qwen3moe checkpoint come back bit for bit from an F32 file (weights and config), within
// one rounding from F16 and BF16 files, within half a quantisation step from Q8_0 and Q4_0;
// a byte-level BPE vocabulary comes back as a tokenizer.json that encodes every text as the
// original does, and gatedlm's byte tokenizer as no tokenizer file at all.
// Files written by llama.cpp's own code are imported in tests/reference/test_gguf_import_llama.py.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "io/gguf.h"
#include "io/gguf_import.h"
#include "io/half_float.h"
#include "io/tokenizer_json.h"
#include "io_fixtures.h"
#include "model/param_layout.h"
#include "small_tokenizer_json.h"
#include "test_files.h"
#include "test_util.h"

namespace gatedlm::io {
namespace {

using nlohmann::json;
using testing::random_checkpoint;
using testing::TempDir;

json dense_config() {
  return json{{"vocab_size", 300}, {"d_model", 64},  {"n_layers", 2},     {"n_heads", 4},
              {"n_kv_heads", 2},   {"head_dim", 16}, {"ffn_hidden", 96}, {"max_seq_len", 128},
              {"norm_eps", 1e-6},  {"rope_base", 1e6}};
}

json moe_config() {
  json j = dense_config();
  j["moe"] = {{"n_experts", 4}, {"top_k", 2}, {"expert_hidden", 32}};
  return j;
}

// A byte-level BPE tokenizer.json with Qwen2's pre-tokenizer and NFC (as Qwen3 ships it):
// the 256 byte symbols, a few merges, <|endoftext|> and <|im_start|> special, one
// user-defined added token.
std::string qwen2_style_tokenizer(const TempDir& dir) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_level_symbol(static_cast<unsigned char>(b))] = b;
  const std::string sp = byte_level_symbol(' ');
  json merges = json::array();
  for (const auto& [l, r] : std::vector<std::pair<std::string, std::string>>{
           {"t", "h"}, {"th", "e"}, {sp, "th"}, {"i", "n"}, {"e", "r"}, {sp, "a"}, {"o", "n"},
           // Merges only GPT-2's split regex would reach (Qwen2's splits digits one by one):
           // a vocabulary read back with the wrong regex encodes "12" and " 1" differently.
           {"1", "2"}, {sp, "1"}}) {
    vocab[l + r] = static_cast<int>(vocab.size());
    merges.push_back(json::array({l, r}));
  }
  const int n = static_cast<int>(vocab.size());
  auto added = [](int id, const char* content, bool special) {
    return json{{"id", id},         {"content", content}, {"single_word", false}, {"lstrip", false},
                {"rstrip", false}, {"normalized", false}, {"special", special}};
  };
  const json j{
      {"version", "1.0"},
      {"added_tokens", {added(n, "<|endoftext|>", true), added(n + 1, "<|im_start|>", true), added(n + 2, "<tool>", false)}},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer", testing::qwen2_pre_tokenizer()},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
  const std::string path = (dir / "tokenizer.json").string();
  testing::write_file(path, j.dump());
  return path;
}

ImportedGguf export_then_import(const Checkpoint& ck, kernels::ElementType dtype, const std::string& tokenizer, const TempDir& dir) {
  const std::string path = (dir / "model.gguf").string();
  export_gguf(ck, dtype, tokenizer, path);
  return import_gguf(path);
}

void expect_bit_identical(const Checkpoint& a, const Checkpoint& b) {
  EXPECT_EQ(model::config_to_json(a.config), model::config_to_json(b.config));
  ASSERT_EQ(a.params.size(), b.params.size());
  EXPECT_EQ(std::memcmp(a.params.data(), b.params.data(), a.params.size() * sizeof(float)), 0);
}

TEST(GgufImport, F32RoundTripIsBitIdenticalDenseAndMoe) {
  const TempDir dir("gguf_import");
  for (const json& config : {dense_config(), moe_config()}) {
    SCOPED_TRACE(config.dump());
    const Checkpoint ck = random_checkpoint(config, 5);
    const ImportedGguf back = export_then_import(ck, kernels::ElementType::f32, kByteVocabulary, dir);
    EXPECT_EQ(back.architecture, ck.config.moe.enabled() ? "qwen3moe" : "qwen3");
    expect_bit_identical(back.checkpoint, ck);
  }
}

TEST(GgufImport, TiedEmbeddingsComeBackTied) {
  const TempDir dir("gguf_import");
  json config = dense_config();
  config["tie_embeddings"] = true;
  const Checkpoint ck = random_checkpoint(config, 6);
  expect_bit_identical(export_then_import(ck, kernels::ElementType::f32, kByteVocabulary, dir).checkpoint, ck);
}

// Each weight within the rounding of its stored type: matrices in F16 / BF16 (half an ulp
// of 11 / 8 significant bits), norms exact (F32 in every file).
TEST(GgufImport, F16AndBf16RoundTripsAreWithinOneRounding) {
  const TempDir dir("gguf_import");
  for (const json& config : {dense_config(), moe_config()})
    for (const auto& [dtype, bits] : {std::pair{kernels::ElementType::f16, 11}, std::pair{kernels::ElementType::bf16, 8}}) {
      const Checkpoint ck = random_checkpoint(config, 7);
      const ImportedGguf back = export_then_import(ck, dtype, kByteVocabulary, dir);
      EXPECT_EQ(model::config_to_json(back.checkpoint.config), model::config_to_json(ck.config));
      const model::ParamLayout layout(ck.config);
      size_t rounded = 0;
      for (const model::ParamSpec& s : layout.specs())
        for (int64_t i = s.offset; i < s.offset + s.numel; ++i) {
          const float want = ck.params[i], got = back.checkpoint.params[i];
          if (s.shape.size() == 1) ASSERT_EQ(got, want) << s.name << "[" << i - s.offset << "]";
          else ASSERT_LE(std::fabs(got - want), std::ldexp(std::fabs(want), -bits) + 1e-7f) << s.name;
          rounded += got != want;
        }
      EXPECT_GT(rounded, ck.params.size() / 2) << "the matrices were not stored in 16 bits";
    }
}

TEST(GgufImport, Q8AndQ4FilesAreDequantisedWithinHalfAStep) {
  const TempDir dir("gguf_import");
  const Checkpoint ck = random_checkpoint(dense_config(), 8);
  for (const auto& [dtype, tolerance] : {std::pair{kernels::ElementType::q8_0, 0.01}, std::pair{kernels::ElementType::q4_0, 0.15}}) {
    const ImportedGguf back = export_then_import(ck, dtype, kByteVocabulary, dir);
    EXPECT_LT(testing::rel_error(back.checkpoint.params, ck.params), tolerance);
    EXPECT_NE(back.checkpoint.params, ck.params);
  }
}

TEST(GgufImport, ByteTokenizerComesBackAsNoTokenizerFile) {
  const TempDir dir("gguf_import");
  json config = dense_config();
  config["vocab_size"] = kByteVocabularySize;
  const ImportedGguf back = export_then_import(random_checkpoint(config, 9), kernels::ElementType::f32, kByteVocabulary, dir);
  EXPECT_TRUE(back.tokenizer_json.empty());
  EXPECT_NE(back.vocabulary.find("byte tokenizer"), std::string::npos) << back.vocabulary;
}

// The imported tokenizer.json encodes (and decodes) like the original: Qwen2's split regex
// and NFC (the pre-tokenizer "qwen2" stands for), the merges by rank, the added tokens.
TEST(GgufImport, VocabularyComesBackAsATokenizerThatEncodesLikeTheOriginal) {
  const TempDir dir("gguf_import");
  const std::string original_path = qwen2_style_tokenizer(dir);
  const ImportedGguf back = export_then_import(random_checkpoint(dense_config(), 10), kernels::ElementType::f16, original_path, dir);
  ASSERT_FALSE(back.tokenizer_json.empty());
  const std::string imported_path = (dir / "imported.json").string();
  testing::write_file(imported_path, back.tokenizer_json);
  const auto original = load_tokenizer_json(original_path), imported = load_tokenizer_json(imported_path);
  EXPECT_EQ(imported->vocab_size(), original->vocab_size());
  EXPECT_EQ(imported->eos_id(), original->eos_id());
  const char* texts[] = {
      "the theater in the other thing, 12345 then",
      "I'm you're THE'LL it's   \t\t\n\n  x\r\n\r\ny",
      "Gr\xc3\xbc\xc3\x9f" "e, na\xc3\xafve e\xcc\x81 \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x98\x80",  // e + combining acute: NFC
      "<|endoftext|>the<|im_start|>user\n<tool>on<tool>",
  };
  for (const char* text : texts) {
    const std::vector<int32_t> ids = original->encode(text);
    EXPECT_EQ(imported->encode(text), ids) << text;
    EXPECT_EQ(imported->decode(ids), original->decode(ids));
  }
}

}  // namespace
}  // namespace gatedlm::io
