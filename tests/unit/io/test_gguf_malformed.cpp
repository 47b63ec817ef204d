// Malformed and unsupported GGUF files: each is refused by import_gguf with a gatedlm::Error
// whose message names the file and the key or tensor at fault (never a crash, never an
// allocation sized by a number in the file). The files are a valid export re-serialised
// with one change (RawGguf below writes whatever it is given, inconsistent or not).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "io/gguf.h"
#include "io/gguf_import.h"
#include "io/gguf_reader.h"
#include "model/param_layout.h"
#include "test_files.h"
#include "test_util.h"

namespace gatedlm::io {
namespace {

using testing::contains;
using testing::TempDir;

// A GGUF file as parts, written back byte for byte as given.
struct RawGguf {
  struct Tensor {
    std::string name;
    std::vector<uint64_t> dims;  // innermost first
    uint32_t type;
    uint64_t offset;  // in the data section
  };
  uint32_t magic = 0x46554747, version = 3;
  std::vector<std::pair<std::string, GgufValue>> kv;
  std::vector<Tensor> tensors;
  std::string data;
  std::string infos_suffix;  // appended after the tensor infos (before the alignment padding)

  GgufValue* find(const std::string& key) {
    for (auto& [k, v] : kv)
      if (k == key) return &v;
    return nullptr;
  }
  void erase(const std::string& key) {
    for (auto it = kv.begin(); it != kv.end(); ++it)
      if (it->first == key) {
        kv.erase(it);
        return;
      }
  }
  Tensor* tensor(const std::string& name) {
    for (Tensor& t : tensors)
      if (t.name == name) return &t;
    return nullptr;
  }
};

template <typename T>
void put(std::string& s, T v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof(T));
}
void put_str(std::string& s, const std::string& v) {
  put<uint64_t>(s, v.size());
  s += v;
}

void put_scalar(std::string& s, uint32_t type, const GgufValue& v, size_t i) {
  switch (type) {
    case 0: case 1: case 7: put<uint8_t>(s, static_cast<uint8_t>(v.ints[i])); return;
    case 2: case 3: put<uint16_t>(s, static_cast<uint16_t>(v.ints[i])); return;
    case 4: case 5: put<uint32_t>(s, static_cast<uint32_t>(v.ints[i])); return;
    case 10: case 11: put<uint64_t>(s, static_cast<uint64_t>(v.ints[i])); return;
    case 6: put<float>(s, static_cast<float>(v.floats[i])); return;
    case 12: put<double>(s, v.floats[i]); return;
    case 8: put_str(s, v.strings[i]); return;
  }
  put<uint8_t>(s, 0);  // an unknown type: one byte, for the reader to refuse
}

std::string serialize(const RawGguf& g) {
  std::string s;
  put(s, g.magic), put(s, g.version);
  put<uint64_t>(s, g.tensors.size()), put<uint64_t>(s, g.kv.size());
  for (const auto& [key, v] : g.kv) {
    put_str(s, key);
    put(s, v.type);
    if (!v.is_array()) {
      put_scalar(s, v.type, v, 0);
      continue;
    }
    put(s, v.elem_type);
    const size_t n = v.elem_type == 8 ? v.strings.size() : v.elem_type == 6 || v.elem_type == 12 ? v.floats.size() : v.ints.size();
    put<uint64_t>(s, n);
    for (size_t i = 0; i < n; ++i) put_scalar(s, v.elem_type, v, i);
  }
  for (const RawGguf::Tensor& t : g.tensors) {
    put_str(s, t.name);
    put<uint32_t>(s, static_cast<uint32_t>(t.dims.size()));
    for (uint64_t d : t.dims) put(s, d);
    put(s, t.type), put(s, t.offset);
  }
  s += g.infos_suffix;
  s.append((32 - s.size() % 32) % 32, '\0');
  return s + g.data;
}

// The parts of a file the reader accepts (its data section read raw).
RawGguf parse(const std::string& path) {
  GgufReader r(path);
  RawGguf g;
  g.version = r.version();
  for (const auto& [k, v] : r.metadata()) g.kv.emplace_back(k, v);
  const std::string bytes = testing::read_file(path);
  const uint64_t data_start = r.tensors().empty() ? bytes.size() : [&] {
    uint64_t lo = UINT64_MAX;
    for (const GgufTensorInfo& t : r.tensors()) lo = std::min(lo, t.offset);
    return lo;
  }();
  for (const GgufTensorInfo& t : r.tensors()) {
    std::vector<uint64_t> dims(t.shape.rbegin(), t.shape.rend());
    g.tensors.push_back({t.name, dims, t.type, t.offset - data_start});
  }
  g.data = bytes.substr(data_start);
  return g;
}

GgufValue u32(int64_t v) { return GgufValue{4, 0, {v}, {}, {}}; }
GgufValue str(const std::string& v) { return GgufValue{8, 0, {}, {}, {v}}; }

class GgufMalformed : public ::testing::Test {
 protected:
  GgufMalformed() : dir_("gguf_malformed") {
    nlohmann::json j{{"vocab_size", 258}, {"d_model", 32}, {"n_layers", 2},  {"n_heads", 2},
                     {"n_kv_heads", 1},   {"head_dim", 16}, {"ffn_hidden", 64}, {"max_seq_len", 32}};
    j_ = j;
    Checkpoint ck{model::config_from_json(j, "test"), {}};
    ck.params = testing::random_vector<float>(model::ParamLayout(ck.config).total(), 3, 0.1);
    export_gguf(ck, kernels::ElementType::f32, kByteVocabulary, (dir_ / "valid.gguf").string());
    valid_ = parse((dir_ / "valid.gguf").string());
  }

  // import_gguf of `bytes` must be refused with a message holding the path and every needle.
  void expect_refused(const std::string& bytes, std::initializer_list<std::string> needles) {
    const std::string path = (dir_ / "bad.gguf").string();
    testing::write_file(path, bytes);
    const std::string message = testing::error_of([&] { (void)import_gguf(path); });
    EXPECT_TRUE(contains(message, path)) << message;
    for (const std::string& n : needles) EXPECT_TRUE(contains(message, n)) << "missing \"" << n << "\" in: " << message;
  }
  void expect_refused(const RawGguf& g, std::initializer_list<std::string> needles) { expect_refused(serialize(g), needles); }

  TempDir dir_;
  nlohmann::json j_;
  RawGguf valid_;
};

TEST_F(GgufMalformed, TheBaselineImports) {
  const std::string path = (dir_ / "again.gguf").string();
  testing::write_file(path, serialize(valid_));
  EXPECT_EQ(import_gguf(path).checkpoint.params, import_gguf((dir_ / "valid.gguf").string()).checkpoint.params);
}

TEST_F(GgufMalformed, HeaderMagicAndVersion) {
  RawGguf g = valid_;
  g.magic = 0x4c4d5347;
  expect_refused(g, {"not a GGUF file"});
  for (uint32_t v : {1u, 4u, 0x03000000u}) {
    g = valid_;
    g.version = v;
    expect_refused(g, {"version", std::to_string(v)});
  }
  expect_refused(std::string("GGUF"), {"truncated"});
  expect_refused(std::string(), {"truncated"});
}

// Cuts through the header and first key (every byte), the rest of the metadata and the
// tensor infos (every 13th byte) and the data (every 509th).
TEST_F(GgufMalformed, EveryTruncationIsRefused) {
  const std::string bytes = serialize(valid_);
  const size_t data_start = bytes.size() - valid_.data.size();
  uint64_t data_end = 0;  // the last tensor's end (past it is only padding)
  const GgufReader reader((dir_ / "valid.gguf").string());  // tensors() refers into it
  for (const GgufTensorInfo& t : reader.tensors())
    data_end = std::max(data_end, t.offset + t.bytes);
  for (size_t n = 0; n < data_end; n += n < 64 ? 1 : n < data_start ? 13 : 509)
    expect_refused(bytes.substr(0, n), {});
}

TEST_F(GgufMalformed, CountsAndLengthsBeyondTheFile) {
  std::string bytes = serialize(valid_);
  std::string b = bytes;
  const uint64_t huge = uint64_t{1} << 60;
  std::memcpy(b.data() + 16, &huge, 8);  // key/value count
  expect_refused(b, {"cannot fit"});
  b = bytes;
  std::memcpy(b.data() + 8, &huge, 8);  // tensor count
  expect_refused(b, {"cannot fit"});
  b = bytes;
  std::memcpy(b.data() + 24, &huge, 8);  // the first key's length
  expect_refused(b, {"truncated", "key 0"});
  RawGguf g = valid_;
  g.find("tokenizer.ggml.tokens")->strings[3] = std::string(1, 'x');
  std::string s = serialize(g);
  const size_t at = s.find(std::string("\x01\0\0\0\0\0\0\0x", 9));
  ASSERT_NE(at, std::string::npos);
  std::memcpy(s.data() + at, &huge, 8);  // a token string's length
  expect_refused(s, {"truncated", "tokenizer.ggml.tokens"});
}

TEST_F(GgufMalformed, ArraysAndValueTypes) {
  RawGguf g = valid_;
  g.kv.emplace_back("zz.nested", GgufValue{9, 9, {}, {}, {}});
  expect_refused(g, {"zz.nested", "arrays of arrays"});
  g = valid_;
  g.kv.emplace_back("zz.odd", GgufValue{13, 0, {1}, {}, {}});
  expect_refused(g, {"zz.odd", "unknown value type 13"});
  g = valid_;
  g.kv.emplace_back("zz.array", GgufValue{9, 4, {1, 2, 3}, {}, {}});
  std::string s = serialize(g);
  const uint64_t huge = uint64_t{1} << 40;
  const size_t at = s.find("zz.array") + 8 + 8;  // past the name, the type and the element type
  std::memcpy(s.data() + at, &huge, 8);
  expect_refused(s, {"zz.array", "cannot fit"});
}

TEST_F(GgufMalformed, DuplicateKeysAndTensors) {
  RawGguf g = valid_;
  g.kv.push_back(g.kv.front());
  expect_refused(g, {"duplicate key", g.kv.front().first});
  g = valid_;
  g.tensors[1].name = g.tensors[0].name;
  expect_refused(g, {"duplicate tensor", g.tensors[0].name});
}

TEST_F(GgufMalformed, TensorInfos) {
  RawGguf g = valid_;
  g.tensors[0].type = 99;
  expect_refused(g, {g.tensors[0].name, "unknown ggml type 99"});
  g = valid_;
  g.tensors[0].dims = {};
  expect_refused(g, {g.tensors[0].name, "0 dims"});
  g = valid_;
  g.tensors[0].dims = {1, 1, 1, 1, 1};
  expect_refused(g, {g.tensors[0].name, "5 dims"});
  g = valid_;
  g.tensors[0].dims = {uint64_t{1} << 40, uint64_t{1} << 40};
  expect_refused(g, {g.tensors[0].name, "overflow"});
  g = valid_;
  g.tensors[0].type = 8;  // Q8_0: 32-value blocks
  g.tensors[0].dims[0] = 31;
  expect_refused(g, {g.tensors[0].name, "whole blocks"});
  g = valid_;
  g.tensors[0].type = 12;  // Q4_K: rows of 128 values are half a super-block
  g.tensors[0].dims[0] = 128;
  expect_refused(g, {g.tensors[0].name, "whole blocks"});
}

TEST_F(GgufMalformed, OffsetsMisalignedOutOfRangeOrOverlapping) {
  RawGguf g = valid_;
  g.tensors[1].offset += 4;
  expect_refused(g, {g.tensors[1].name, "not a multiple of 32"});
  g = valid_;
  g.tensors.back().offset = g.data.size();
  expect_refused(g, {g.tensors.back().name, "past the end"});
  g = valid_;
  g.tensors.back().offset = UINT64_MAX - 31;
  expect_refused(g, {g.tensors.back().name, "past the end"});
  g = valid_;
  g.tensors[2].offset = g.tensors[1].offset;
  expect_refused(g, {"overlap"});
  g = valid_;
  g.data.resize(g.data.size() - 64);
  expect_refused(g, {"past the end"});
  g = valid_;
  *g.find("general.alignment") = u32(48);
  expect_refused(g, {"general.alignment", "power of two"});
}

TEST_F(GgufMalformed, ArchitectureAndKeys) {
  RawGguf g = valid_;
  *g.find("general.architecture") = str("llama");
  expect_refused(g, {"general.architecture", "llama"});
  g = valid_;
  *g.find("general.architecture") = str("qwen35");  // a qwen3 file relabelled: none of its keys are qwen35's
  expect_refused(g, {"missing key qwen35."});
  g = valid_;
  g.kv.emplace_back("qwen3.rope.scaling.type", str("yarn"));
  expect_refused(g, {"qwen3.rope.scaling.type", "yarn"});
  g = valid_;
  g.kv.emplace_back("qwen3.attention.sliding_window", u32(64));
  expect_refused(g, {"qwen3.attention.sliding_window", "not supported"});
  g = valid_;
  *g.find("qwen3.attention.value_length") = u32(8);
  expect_refused(g, {"qwen3.attention.key_length", "qwen3.attention.value_length", "disagree"});
  g = valid_;
  *g.find("qwen3.block_count") = str("two");
  expect_refused(g, {"qwen3.block_count", "not an integer"});
  g = valid_;
  *g.find("qwen3.block_count") = u32(3000000000);
  expect_refused(g, {"qwen3.block_count", "3000000000", "out of range"});
  g = valid_;
  *g.find("qwen3.embedding_length") = u32(0);
  expect_refused(g, {"not valid"});
  g = valid_;
  g.erase("qwen3.embedding_length");
  expect_refused(g, {"missing key qwen3.embedding_length"});
}

TEST_F(GgufMalformed, TensorsMissingUnexpectedMisshapenOrOfAnUnreadableType) {
  RawGguf g = valid_;
  g.tensor("blk.1.ffn_up.weight")->name = "blk.1.ffn_upp.weight";
  expect_refused(g, {"missing tensor blk.1.ffn_up.weight"});
  g = valid_;
  g.tensors.push_back({"blk.0.attn_q.bias", {32}, 0, g.data.size()});  // its own 128 bytes at the end
  g.data.append(128, '\0');
  expect_refused(g, {"unexpected tensor blk.0.attn_q.bias"});
  g = valid_;
  std::swap(g.tensor("blk.0.ffn_up.weight")->dims[0], g.tensor("blk.0.ffn_up.weight")->dims[1]);
  expect_refused(g, {"blk.0.ffn_up.weight", "has shape [32, 64]", "[64, 32]"});
  g = valid_;
  RawGguf::Tensor& q = *g.tensor("blk.0.attn_q.weight");
  q.type = 16;  // IQ2_XXS: [32 x 32] is 4 blocks of 256 values, 264 bytes, inside the F32 data
  q.dims = {256, 4};
  expect_refused(g, {"blk.0.attn_q.weight", "IQ2_XXS", "gatedlm reads", "Q4_K"});
  g = valid_;
  *g.find("qwen3.block_count") = u32(3);
  expect_refused(g, {"missing tensor blk.2.attn_norm.weight", "3 layers"});
  g = valid_;
  *g.find("qwen3.block_count") = u32(40);
  expect_refused(g, {"qwen3.block_count", "40 layers"});
}

TEST_F(GgufMalformed, NonFiniteWeightsAreNamed) {
  RawGguf g = valid_;
  const RawGguf::Tensor& t = *g.tensor("blk.1.attn_k.weight");
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(g.data.data() + t.offset + 4 * 5, &nan, 4);
  expect_refused(g, {"blk.1.attn_k.weight", "5"});
}

TEST_F(GgufMalformed, Vocabularies) {
  RawGguf g = valid_;
  *g.find("tokenizer.ggml.model") = str("llama");
  expect_refused(g, {"tokenizer.ggml.model", "llama"});
  g = valid_;
  g.find("tokenizer.ggml.tokens")->strings[65] = "<|x|>";  // no longer gatedlm's byte tokenizer
  *g.find("tokenizer.ggml.pre") = str("deepseek-llm");
  expect_refused(g, {"tokenizer.ggml.pre", "deepseek-llm"});
  g = valid_;
  g.find("tokenizer.ggml.token_type")->ints[70] = 6;
  expect_refused(g, {"tokenizer.ggml.token_type", "70", "byte token"});
  g = valid_;
  g.find("tokenizer.ggml.tokens")->strings[71] = g.find("tokenizer.ggml.tokens")->strings[72];
  expect_refused(g, {"tokenizer.ggml.tokens", "71", "72"});
  g = valid_;
  g.find("tokenizer.ggml.tokens")->strings[73] = "\xff\xfe";
  expect_refused(g, {"tokenizer.ggml.tokens", "73", "UTF-8"});
  g = valid_;
  g.find("tokenizer.ggml.token_type")->ints.pop_back();
  expect_refused(g, {"tokenizer.ggml.token_type", "types for"});
  g = valid_;
  *g.find("tokenizer.ggml.eos_token_id") = u32(5000);
  expect_refused(g, {"tokenizer.ggml.eos_token_id", "5000"});
  g = valid_;
  g.find("tokenizer.ggml.tokens")->strings.resize(300, "[PAD]");
  g.find("tokenizer.ggml.token_type")->ints.resize(300, 5);
  expect_refused(g, {"tokenizer.ggml.tokens", "300 tokens", "vocab_size 258"});
  g = valid_;
  g.find("tokenizer.ggml.merges")->strings.push_back("nospace");
  expect_refused(g, {"tokenizer.ggml.merges", "nospace"});
}

// A hybrid file (qwen35moe: Gated DeltaNet layers 0 and 2, a shared expert) with one change.
class GgufMalformedHybrid : public GgufMalformed {
 protected:
  GgufMalformedHybrid() {
    nlohmann::json j = j_;
    j.update({{"n_layers", 4}, {"ffn_hidden", 0}, {"full_attention_interval", 2}, {"rope_dims", 8},
              {"gate", {{"position", "sdpa"}}},
              {"moe", {{"n_experts", 4}, {"top_k", 2}, {"expert_hidden", 16}, {"n_shared", 1}}},
              {"linear_attention", {{"n_k_heads", 1}, {"n_v_heads", 2}, {"k_head_dim", 8}, {"v_head_dim", 8}}}});
    Checkpoint ck{model::config_from_json(j, "test"), {}};
    ck.params = testing::random_vector<float>(model::ParamLayout(ck.config).total(), 4, 0.1);
    export_gguf(ck, kernels::ElementType::f32, kByteVocabulary, (dir_ / "hybrid.gguf").string());
    hybrid_ = parse((dir_ / "hybrid.gguf").string());
  }
  RawGguf hybrid_;
};

TEST_F(GgufMalformedHybrid, SsmTensorsMissingMisshapenOrOutOfDomain) {
  RawGguf g = hybrid_;
  g.tensor("blk.2.ssm_a")->name = "blk.2.ssm_aa";
  expect_refused(g, {"missing tensor blk.2.ssm_a "});
  g = hybrid_;
  std::swap(g.tensor("blk.0.ssm_conv1d.weight")->dims[0], g.tensor("blk.0.ssm_conv1d.weight")->dims[1]);
  expect_refused(g, {"blk.0.ssm_conv1d.weight", "has shape [4, 32]", "[32, 4]"});
  g = hybrid_;
  const float positive = 0.5f;  // -exp(A_log) is negative
  std::memcpy(g.data.data() + g.tensor("blk.2.ssm_a")->offset + 4, &positive, 4);
  expect_refused(g, {"blk.2.ssm_a", "negative"});
}

// Hardening, third round, row 9: rope.dimension_sections as 64-bit values near INT64_MAX made
// the coverage check compute 3 * sections[i], a signed overflow (undefined behaviour, which
// the sanitizer build stops on). Such sections cover every pair: the file imports.
TEST_F(GgufMalformedHybrid, HugeRopeSectionsAreComparedWithoutOverflow) {
  RawGguf g = hybrid_;
  GgufValue* sections = g.find("qwen35moe.rope.dimension_sections");
  sections->elem_type = 11;  // int64
  sections->ints = {INT64_MAX, INT64_MAX - 1, INT64_MAX / 2, 0};
  const std::string path = (dir_ / "huge_sections.gguf").string();
  testing::write_file(path, serialize(g));
  EXPECT_EQ(import_gguf(path).checkpoint.params, import_gguf((dir_ / "hybrid.gguf").string()).checkpoint.params);
}

// Multi-token-prediction blocks (the last nextn_predict_layers of block_count) are left out,
// with a line saying so; the model's own blocks import as they are.
TEST_F(GgufMalformedHybrid, MtpBlocksAreLeftOut) {
  RawGguf g = hybrid_;
  g.kv.emplace_back("qwen35moe.nextn_predict_layers", u32(1));
  const std::string path = (dir_ / "mtp.gguf").string();
  testing::write_file(path, serialize(g));
  const ImportedGguf with_mtp = import_gguf(path);
  const ImportedGguf all = import_gguf((dir_ / "hybrid.gguf").string());
  EXPECT_EQ(with_mtp.checkpoint.config.n_layers, 3);
  EXPECT_TRUE(contains(with_mtp.skipped, "1 multi-token-prediction block")) << with_mtp.skipped;
  EXPECT_TRUE(all.skipped.empty());
  const model::ParamLayout three(with_mtp.checkpoint.config), four(all.checkpoint.config);
  for (const model::ParamSpec& s : three.specs()) {
    const model::ParamSpec& t = four.at(s.name);
    ASSERT_TRUE(std::equal(with_mtp.checkpoint.params.begin() + s.offset, with_mtp.checkpoint.params.begin() + s.offset + s.numel,
                           all.checkpoint.params.begin() + t.offset))
        << s.name;
  }
}

// Without gatedlm's key (a file of llama.cpp's converter), a hybrid's norms are read as
// Qwen3.5's and Qwen3-Next's: zero-centred, stored 1 + w.
TEST_F(GgufMalformedHybrid, NormsWithoutGatedlmsKeyAreZeroCentred) {
  RawGguf g = hybrid_;
  ASSERT_NE(g.find(kGgufNormZeroCenteredKey), nullptr);
  g.erase(kGgufNormZeroCenteredKey);
  const std::string path = (dir_ / "converter.gguf").string();
  testing::write_file(path, serialize(g));
  const ImportedGguf converter = import_gguf(path), gatedlm = import_gguf((dir_ / "hybrid.gguf").string());
  EXPECT_FALSE(gatedlm.checkpoint.config.norm_zero_centered);
  EXPECT_TRUE(converter.checkpoint.config.norm_zero_centered);
  const model::ParamLayout layout(gatedlm.checkpoint.config);
  const model::ParamSpec& norm = layout.at("model.layers.1.self_attn.q_norm.weight");
  const model::ParamSpec& gated = layout.at("model.layers.0.linear_attn.norm.weight");  // never zero-centred
  for (int64_t i = 0; i < norm.numel; ++i)
    EXPECT_EQ(converter.checkpoint.params[norm.offset + i], gatedlm.checkpoint.params[norm.offset + i] - 1.0f) << i;
  for (int64_t i = 0; i < gated.numel; ++i)
    EXPECT_EQ(converter.checkpoint.params[gated.offset + i], gatedlm.checkpoint.params[gated.offset + i]) << i;
}

TEST_F(GgufMalformedHybrid, HybridKeys) {
  RawGguf g = hybrid_;
  *g.find("qwen35moe.ssm.inner_size") = u32(24);
  expect_refused(g, {"qwen35moe.ssm.inner_size", "24"});
  g = hybrid_;
  g.erase("qwen35moe.ssm.group_count");
  expect_refused(g, {"missing key qwen35moe.ssm.group_count"});
  g = hybrid_;
  g.erase("qwen35moe.full_attention_interval");
  g.kv.emplace_back("qwen35moe.attention.recurrent_layers", GgufValue{9, 7, {1, 0, 1}, {}, {}});
  expect_refused(g, {"qwen35moe.attention.recurrent_layers", "3 flags for 4 layers"});
  g = hybrid_;
  g.find("qwen35moe.rope.dimension_sections")->ints = {1, 1, 1, 0};  // 4 pairs: pair 3 has no section
  expect_refused(g, {"qwen35moe.rope.dimension_sections", "pair 3"});
  g = hybrid_;
  g.kv.emplace_back("qwen35moe.nextn_predict_layers", u32(4));
  expect_refused(g, {"qwen35moe.nextn_predict_layers", "leaves none"});
  g = hybrid_;
  *g.find("qwen35moe.block_count") = u32(2000000000);  // no layer kinds sized by it
  expect_refused(g, {"qwen35moe.block_count", "2000000000 layers"});
  g = hybrid_;
  g.kv.emplace_back("qwen35moe.ssm.dt_rank_extra", u32(1));
  expect_refused(g, {"qwen35moe.ssm.dt_rank_extra", "not supported"});
}

}  // namespace
}  // namespace gatedlm::io
