// GGUF's tokenizer.ggml.pre: the export names the llama.cpp pre-tokenizer that splits text
// as the tokenizer.json does (it wrote "qwen2" for every file, so a GPT-2-regex tokenizer
// split differently in llama.cpp), refuses a regex llama.cpp has no name for, and the
// import maps the name back to the regex, normaliser and ignore_merges.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "gguf_test_reader.h"
#include "io/gguf.h"
#include "io/gguf_import.h"
#include "io/gguf_tokenizer.h"
#include "io/tokenizer_json.h"
#include "model/param_layout.h"
#include "test_files.h"
#include "test_util.h"

namespace gatedlm::io {
namespace {

using nlohmann::json;
using testing::contains;
using testing::error_of;
using testing::TempDir;

TEST(GgufPreTokenizer, TableMapsNamesToRegexesAndBack) {
  std::set<std::string> names;
  for (const LlamaPreTokenizer& p : llama_pre_tokenizers()) {
    names.insert(p.name);
    EXPECT_EQ(&llama_pre_tokenizer_named(p.name, "f.gguf"), &p) << p.name;
    std::istringstream aliases(p.aliases);
    for (std::string alias; aliases >> alias;) EXPECT_EQ(&llama_pre_tokenizer_named(alias, "f.gguf"), &p) << alias;
    TokenizerJsonVocabulary v;
    v.split_regex = p.regex, v.ignore_merges = p.ignore_merges;
    EXPECT_EQ(llama_pre_tokenizer_name(v, "t.json"), p.name);
  }
  // The names llama.cpp's llama-vocab.cpp reads ("gpt-2", not the tokenizer model's "gpt2").
  EXPECT_EQ(names, (std::set<std::string>{"qwen2", "qwen35", "llama3", "dbrx", "gpt-2"}));
  // No split at all (gatedlm's byte tokenizer: no merges, so any split gives its ids).
  EXPECT_EQ(llama_pre_tokenizer_name(TokenizerJsonVocabulary{}, "byte"), "qwen2");
}

TEST(GgufPreTokenizer, UnknownRegexesAndNamesAreRefusedNamingThem) {
  TokenizerJsonVocabulary v;
  v.split_regex = R"(\S+|\s+)";
  std::string e = error_of([&] { llama_pre_tokenizer_name(v, "t.json"); });
  for (const char* part : {"t.json: llama.cpp has no pre-tokenizer", "/\\S+|\\s+/", "qwen2", "qwen35", "llama3", "gpt-2"})
    EXPECT_TRUE(contains(e, part)) << part << " in " << e;
  // The llama3 regex without ignore_merges is DBRX's; Qwen2's with it is nobody's.
  v.split_regex = llama_pre_tokenizer_named("qwen2", "").regex, v.ignore_merges = true;
  e = error_of([&] { llama_pre_tokenizer_name(v, "t.json"); });
  EXPECT_TRUE(contains(e, "with ignore_merges")) << e;
  e = error_of([&] { llama_pre_tokenizer_named("bloom", "f.gguf"); });
  EXPECT_TRUE(contains(e, "f.gguf: key tokenizer.ggml.pre is \"bloom\", a pre-tokenizer gatedlm does not know")) << e;
  EXPECT_TRUE(contains(e, "qwen35")) << e;
  for (const std::string name : {"", "default"}) {
    e = error_of([&] { llama_pre_tokenizer_named(name, "f.gguf"); });
    EXPECT_TRUE(contains(e, "llama.cpp splits with its \"default\" pre-tokenizer: four regexes in turn")) << e;
  }
}

// A byte-level BPE tokenizer.json whose merges make each pre-tokenizer's split visible in
// the ids: "4123" is one piece for GPT-2 (\p{N}+: 4 123), "412" and "3" for llama3
// (\p{N}{1,3}: 4 12 3), four for Qwen; "x" + U+0363 (a combining mark, which NFC leaves
// alone) is one piece for qwen35 only.
std::string tokenizer_file(const TempDir& dir, const std::string& name, const json& pre_tokenizer, bool nfc,
                           bool ignore_merges) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_level_symbol(static_cast<unsigned char>(b))] = b;
  const std::string sp = byte_level_symbol(' '), mark = byte_level_symbol(0xcd) + byte_level_symbol(0xa3);
  json merges = json::array();
  for (const auto& [l, r] : std::vector<std::pair<std::string, std::string>>{
           {"1", "2"}, {"12", "3"}, {sp, "1"}, {byte_level_symbol(0xcd), byte_level_symbol(0xa3)}, {"x", mark}}) {
    vocab[l + r] = static_cast<int>(vocab.size());
    merges.push_back(json::array({l, r}));
  }
  const json j{
      {"added_tokens", {{{"id", vocab.size()}, {"content", "<|endoftext|>"}, {"special", true}}}},
      {"normalizer", nfc ? json{{"type", "NFC"}} : json(nullptr)},
      {"pre_tokenizer", pre_tokenizer},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}, {"ignore_merges", ignore_merges}}}};
  const std::string path = (dir / (name + ".json")).string();
  testing::write_file(path, j.dump());
  return path;
}

json split(const std::string& regex) {
  return {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}},
            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
}

Checkpoint tiny_checkpoint() {
  const json config{{"vocab_size", 300}, {"d_model", 32},  {"n_layers", 1},     {"n_heads", 2},
                    {"n_kv_heads", 1},   {"head_dim", 16}, {"ffn_hidden", 48}, {"max_seq_len", 64}};
  Checkpoint ck{model::config_from_json(config, "test"), {}};
  ck.params = testing::random_vector<float>(model::ParamLayout(ck.config).total(), 3, 0.2);
  return ck;
}

TEST(GgufPreTokenizer, ExportWritesTheNameThatSplitsAsTheFileAndImportSplitsTheSame) {
  const TempDir dir("gguf_pre");
  const json byte_level_gpt2{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  const std::string llama3 = llama_pre_tokenizer_named("llama3", "").regex;
  struct Case {
    std::string name, expected;
    json pre_tokenizer;
    bool nfc, ignore_merges;
  };
  const std::vector<Case> cases = {
      {"gpt2", "gpt-2", byte_level_gpt2, false, false},
      {"qwen2", "qwen2", split(llama_pre_tokenizer_named("qwen2", "").regex), true, false},
      {"qwen35", "qwen35", split(llama_pre_tokenizer_named("qwen35", "").regex), true, false},
      {"llama3", "llama3", split(llama3), false, true},
      {"dbrx", "dbrx", split(llama3), false, false},
  };
  const Checkpoint ck = tiny_checkpoint();
  std::set<std::vector<int32_t>> encodings;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string original = tokenizer_file(dir, c.name, c.pre_tokenizer, c.nfc, c.ignore_merges);
    const std::string gguf = (dir / (c.name + ".gguf")).string();
    export_gguf(ck, kernels::ElementType::f32, original, gguf);
    EXPECT_EQ(std::get<std::string>(testing::read_gguf_for_test(gguf).metadata.at("tokenizer.ggml.pre")), c.expected);
    const ImportedGguf back = import_gguf(gguf);
    EXPECT_TRUE(contains(back.vocabulary, "pre-tokenizer " + c.expected)) << back.vocabulary;
    const std::string imported = (dir / (c.name + "_imported.json")).string();
    testing::write_file(imported, back.tokenizer_json);
    const auto a = load_tokenizer_json(original), b = load_tokenizer_json(imported);
    for (const std::string text : {"a4123 x 1234 12 x\xcd\xa3 y  \n\n z", "I'S 123456789<|endoftext|>x\xcd\xa3\xcd\xa3"})
      EXPECT_EQ(b->encode(text), a->encode(text)) << text;
    encodings.insert(a->encode("a4123 x\xcd\xa3"));
  }
  EXPECT_EQ(encodings.size(), 4u);  // the splits differ (llama3 and dbrx split alike)
}

TEST(GgufPreTokenizer, ExportRefusesARegexLlamaCppHasNoNameForWritingNothing) {
  const TempDir dir("gguf_pre");
  const std::string original = tokenizer_file(dir, "words", split(R"(\S+|\s+)"), false, false);
  const std::string gguf = (dir / "words.gguf").string();
  const std::string e = error_of([&] { export_gguf(tiny_checkpoint(), kernels::ElementType::f32, original, gguf); });
  EXPECT_TRUE(contains(e, "words.json: llama.cpp has no pre-tokenizer")) << e;
  EXPECT_FALSE(std::filesystem::exists(gguf));
}

}  // namespace
}  // namespace gatedlm::io
