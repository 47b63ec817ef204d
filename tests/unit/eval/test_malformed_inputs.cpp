// Issue 18: hostile inputs refused in-process, each with a message naming the file, key or
// line and the limit (safetensors format rules, strict JSON, config limits, token-id limits,
// manifests, task shapes, NaN weights).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/json_file.h"
#include "eval/tasks.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "io/token_ids.h"
#include "model/config.h"
#include "model/init.h"
#include "test_files.h"

namespace gatedlm {
namespace {

using testing::contains;
using testing::error_of;
using testing::TempDir;
using testing::write_file;

// A safetensors file from a header text and a data section.
std::string safetensors_bytes(const std::string& header, const std::string& data) {
  uint64_t n = header.size();
  std::string out(reinterpret_cast<const char*>(&n), 8);
  return out + header + data;
}

std::string load_error(const TempDir& dir, const std::string& header, const std::string& data) {
  write_file(dir / "t.safetensors", safetensors_bytes(header, data));
  return error_of([&] { io::SafetensorsReader r((dir / "t.safetensors").string()); });
}

TEST(SafetensorsRules, AcceptsContiguousTensors) {
  TempDir dir("st");
  write_file(dir / "t.safetensors",
             safetensors_bytes(R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                               R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                               std::string(12, '\0')));
  io::SafetensorsReader r((dir / "t.safetensors").string());
  EXPECT_EQ(r.tensors().size(), 2u);
  EXPECT_EQ(r.metadata().at("format"), "pt");
}

TEST(SafetensorsRules, RefusesOverlapGapTrailingBytesDuplicatesExtraFieldsAndBadMetadata) {
  TempDir dir("st");
  const std::string a = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  EXPECT_TRUE(contains(load_error(dir, "{" + a + R"(,"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                  std::string(12, '\0')),
                       "overlaps tensor a"));
  EXPECT_TRUE(contains(load_error(dir, "{" + a + R"(,"b":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})",
                                  std::string(16, '\0')),
                       "a gap in the data: bytes 8..12"));
  EXPECT_TRUE(contains(load_error(dir, "{" + a + "}", std::string(12, '\0')), "4 trailing bytes"));
  const std::string dup = load_error(dir, "{" + a + R"(,"a":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                                     std::string(12, '\0'));
  EXPECT_TRUE(contains(dup, "\"a\" appears twice")) << dup;
  EXPECT_TRUE(contains(load_error(dir, R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})",
                                  std::string(8, '\0')),
                       "unexpected field \"x\""));
  EXPECT_TRUE(contains(load_error(dir, R"({"__metadata__":[1],)" + a + "}", std::string(8, '\0')),
                       "__metadata__ must be an object"));
  EXPECT_TRUE(contains(load_error(dir, R"({"__metadata__":{"k":1},)" + a + "}", std::string(8, '\0')),
                       "__metadata__ key \"k\" must map to a string"));
  EXPECT_TRUE(contains(load_error(dir, R"({"a":{"dtype":"F32","shape":[1e400],"data_offsets":[0,8]}})",
                                  std::string(8, '\0')),
                       "t.safetensors"));
  // A header length beyond the format's 100 MB limit is refused before anything is read.
  uint64_t huge = 200'000'000;
  write_file(dir / "t.safetensors", std::string(reinterpret_cast<const char*>(&huge), 8) + "{}");
  EXPECT_TRUE(contains(error_of([&] { io::SafetensorsReader r((dir / "t.safetensors").string()); }),
                       "more than the format's limit of 100000000"));
}

model::ModelConfig tiny_config() {
  return model::config_from_json({{"vocab_size", 50},
                                  {"d_model", 8},
                                  {"n_layers", 1},
                                  {"n_heads", 2},
                                  {"n_kv_heads", 1},
                                  {"head_dim", 4},
                                  {"ffn_hidden", 16},
                                  {"max_seq_len", 32}});
}

TEST(NonFiniteWeights, LoadingNamesTheTensor) {
  TempDir dir("nan");
  const model::ModelConfig c = tiny_config();
  std::vector<float> params;
  const model::ParamLayout layout(c);
  model::init_params(params, layout, c, 1);
  const model::ParamSpec& spec = layout.specs().back();
  // save_checkpoint refuses to write such a checkpoint (naming the tensor); another tool may.
  const auto write_as_another_tool_would = [&] {
    write_file(dir / "config.json", model::config_to_json(c).dump());
    std::vector<io::TensorRef> refs;
    for (const model::ParamSpec& s : layout.specs()) refs.push_back({s.name, s.shape, params.data() + s.offset});
    io::write_safetensors((dir / "model.safetensors").string(), refs);
  };
  params[spec.offset + 3] = std::numeric_limits<float>::quiet_NaN();
  const std::string refused = error_of([&] { io::save_checkpoint((dir / "refused").string(), c, params); });
  EXPECT_TRUE(contains(refused, spec.name) && contains(refused, "element 3")) << refused;
  write_as_another_tool_would();
  const std::string e = error_of([&] { io::load_checkpoint(dir.path().string()); });
  EXPECT_TRUE(contains(e, spec.name) && contains(e, "element 3")) << e;
  params[spec.offset + 3] = std::numeric_limits<float>::infinity();
  write_as_another_tool_would();
  EXPECT_TRUE(contains(error_of([&] { io::load_checkpoint(dir.path().string()); }), "inf"));
}

TEST(StrictJson, RefusesOverflowDuplicatesAndDirectories) {
  TempDir dir("json");
  write_file(dir / "a.json", R"({"x": 1e400})");
  EXPECT_TRUE(contains(error_of([&] { read_json_file((dir / "a.json").string()); }), "a.json: not valid JSON"));
  write_file(dir / "b.json", R"({"x": {"y": 1, "y": 2}})");
  EXPECT_TRUE(contains(error_of([&] { read_json_file((dir / "b.json").string()); }), "\"y\" appears twice"));
  // The same key in two different objects is fine.
  write_file(dir / "c.json", R"({"x": {"y": 1}, "z": {"y": 2}, "y": 3})");
  EXPECT_EQ(read_json_file((dir / "c.json").string())["y"], 3);
  // A key given twice after a nested object in an array's element (each object counts its
  // own keys), and the same shape without the repeat.
  write_file(dir / "nested_dup.json", R"({"a": [{"k": 1}, {"k": 2, "m": {"k": 3, "n": 0}, "k": 4}]})");
  EXPECT_TRUE(contains(error_of([&] { read_json_file((dir / "nested_dup.json").string()); }), "\"k\" appears twice"));
  write_file(dir / "nested_ok.json", R"({"a": [{"k": 1}, {"k": 2, "m": {"k": 3, "n": 0}, "j": 4}]})");
  EXPECT_EQ(read_json_file((dir / "nested_ok.json").string())["a"][1]["j"], 4);
  std::filesystem::create_directories(dir / "d.json");
  EXPECT_TRUE(contains(error_of([&] { model::load_config((dir / "d.json").string()); }), "is a directory"));
}

TEST(ConfigLimits, MaxSeqLenAndParameterCount) {
  nlohmann::json j = model::config_to_json(tiny_config());
  for (int64_t huge : {int64_t{1} << 62, int64_t{1} << 60, int64_t{1000000000}}) {
    j["max_seq_len"] = huge;
    const std::string e = error_of([&] { model::config_from_json(j, "m.json"); });
    EXPECT_TRUE(contains(e, "m.json") && contains(e, "max_seq_len") && contains(e, "4194304")) << e;
  }
  j = model::config_to_json(tiny_config());
  j["d_model"] = int64_t{1} << 40;
  j["ffn_hidden"] = int64_t{1} << 40;
  EXPECT_TRUE(contains(error_of([&] { model::config_from_json(j, "m.json"); }), "at most 2^31"));
  j["d_model"] = int64_t{1} << 30;
  j["ffn_hidden"] = int64_t{1} << 30;
  const std::string e = error_of([&] { model::config_from_json(j, "m.json"); });
  EXPECT_TRUE(contains(e, "parameters, more than the limit")) << e;
  j = model::config_to_json(tiny_config());
  j["rope_base"] = 1e308 * 10;  // inf, as a JSON number it is written as null: refused by type
  EXPECT_FALSE(error_of([&] { model::config_from_json(j, "m.json"); }).empty());
}

TEST(TokenIdLimits, LengthVocabularyAndShortLinesNameTheLine) {
  TempDir dir("ids");
  std::string long_line;
  for (int i = 0; i < 100000; ++i) long_line += "1 ";
  write_file(dir / "ids.txt", "1 2 3\n" + long_line + "\n");
  io::TokenIdLimits limits{50, 32, 2, "max_seq_len"};
  std::string e = error_of([&] { io::read_token_ids((dir / "ids.txt").string(), limits); });
  EXPECT_TRUE(contains(e, "ids.txt:2") && contains(e, "more than 32 token ids") && contains(e, "max_seq_len")) << e;
  write_file(dir / "ids.txt", "1 2 3\n4 50\n");
  e = error_of([&] { io::read_token_ids((dir / "ids.txt").string(), limits); });
  EXPECT_TRUE(contains(e, "ids.txt:2") && contains(e, "token id 50 is outside") && contains(e, "0..49")) << e;
  write_file(dir / "ids.txt", "1 2 3\n\n7\n");
  e = error_of([&] { io::read_token_ids((dir / "ids.txt").string(), limits); });
  EXPECT_TRUE(contains(e, "ids.txt:3") && contains(e, "at least 2")) << e;
  write_file(dir / "ids.txt", std::string(33 * 2, ' ') + "\n1 2\n");
  EXPECT_EQ(io::read_token_ids((dir / "ids.txt").string(), limits).size(), 1u);
}

TEST(TaskShapeLimits, DistractorsBeyondTheKeySpaceAreRefused) {
  eval::TaskShape shape;
  shape.multikey_distractors = 1000;
  const std::string e = error_of([&] { shape.validate(); });
  EXPECT_TRUE(contains(e, "--distractors 1000") && contains(e, "575")) << e;
  shape.multikey_distractors = eval::TaskShape::key_space() - 1;
  shape.validate();  // the largest that can be drawn unique
  const auto tok = io::Tokenizer::load("byte");
  // The needed length is reported as what the task needs, not as a fixed probe length.
  const int64_t need = eval::task_min_length(eval::TaskKind::niah_multikey, *tok, shape);
  EXPECT_GT(need, 575 * 40);
  const eval::Filler filler = eval::Filler::neutral(*tok);
  Rng rng(3);
  const std::string short_err =
      error_of([&] { eval::make_task_example(eval::TaskKind::niah_multikey, *tok, filler, 64, 0.5, rng, shape); });
  EXPECT_TRUE(contains(short_err, "a length of 64 tokens is too short")) << short_err;
}

}  // namespace
}  // namespace gatedlm
