// The model-family table (io/model_family.h): the registry lists the six families in order,
// each family writes a config.json it reads back to the same model and that --format auto
// gives back to it, detection follows model_type, the help texts list every family, and a
// new family -- a toy whose gate is a separate g_proj projection -- is added from this file
// alone, through the same interface, and round-trips a checkpoint through import and export.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/gguf.h"
#include "io/hf_config.h"
#include "io/hf_convert.h"
#include "io/hf_names.h"
#include "io/hf_reader.h"
#include "io/hf_shared_keys.h"
#include "io/model_family.h"
#include "io/safetensors.h"
#include "io_fixtures.h"
#include "model/param_layout.h"
#include "test_files.h"
#include "test_util.h"

namespace gatedlm::io {
namespace {

using nlohmann::json;
using testing::g1_gate;

std::vector<std::string> registered_names() {
  std::vector<std::string> names;
  for (const ModelFamily* f : model_families()) names.push_back(f->name);
  return names;
}

TEST(ModelFamilies, TheRegistryListsTheSixFamiliesInOrder) {
  EXPECT_EQ(registered_names(),
            (std::vector<std::string>{"paper", "qwen3", "qwen3_moe", "qwen3_next", "qwen3_5", "qwen3_5_moe"}));
  for (const ModelFamily* f : model_families()) {
    EXPECT_EQ(find_family(f->name), f);
    EXPECT_EQ(parse_hf_format(f->name), HfFormat(*f));
    if (f->gguf) {
      EXPECT_EQ(find_gguf_family(f->gguf->name), f) << f->name;
    }
  }
  // The compatibility handles name the registered families.
  EXPECT_EQ(to_string(HfFormat::qwen3_5_moe), "qwen3_5_moe");
  EXPECT_EQ(&HfFormat::paper.family(), find_family("paper"));
}

TEST(ModelFamilies, GgufArchitecturesListTheAutomaticOnesFirst) {
  EXPECT_EQ(gguf_architecture_names(", "), "qwen3, qwen3moe, qwen35, qwen35moe, qwen3next");
  EXPECT_EQ(find_family("paper")->gguf, nullptr);  // llama.cpp has no all-softmax G1 model
  EXPECT_EQ(find_gguf_family("qwen3next"), find_family("qwen3_next"));
  EXPECT_EQ(find_gguf_family("llama"), nullptr);
}

// A model each family can express, as gatedlm's config JSON.
json base_model() {
  return {{"vocab_size", 40}, {"d_model", 32}, {"n_layers", 4},   {"n_heads", 4},       {"n_kv_heads", 2},
          {"head_dim", 8},    {"ffn_hidden", 48}, {"max_seq_len", 64}, {"norm_eps", 1e-6}, {"rope_base", 5e5}};
}
json hybrid_model() {
  json j = base_model();
  j["gate"] = g1_gate();
  j["rope_dims"] = 4;
  j["norm_zero_centered"] = true;
  j["full_attention_interval"] = 2;
  j["linear_attention"] = {{"n_k_heads", 2}, {"n_v_heads", 4}, {"k_head_dim", 8}, {"v_head_dim", 8}};
  return j;
}
json with_moe(json j, int64_t n_shared) {
  j["moe"] = {{"n_experts", 4}, {"top_k", 2}, {"expert_hidden", 16}, {"n_shared", n_shared}, {"norm_topk_prob", true}};
  if (n_shared > 0) j["moe"]["shared_hidden"] = 24;
  return j;
}

struct FamilyCase {
  const char* family;
  json model;
  const char* model_type;  // what export writes
};
std::vector<FamilyCase> family_cases() {
  json paper = base_model();
  paper["gate"] = {{"position", "sdpa"}, {"granularity", "headwise"}};
  return {{"paper", paper, "qwen3"},
          {"qwen3", base_model(), "qwen3"},
          {"qwen3_moe", with_moe(base_model(), 0), "qwen3_moe"},
          {"qwen3_next", with_moe(hybrid_model(), 1), "qwen3_next"},
          {"qwen3_5", hybrid_model(), "qwen3_5_text"},
          {"qwen3_5_moe", with_moe(hybrid_model(), 1), "qwen3_5_moe_text"}};
}

TEST(ModelFamilies, EachFamilyRoundTripsItsConfigKeysAndIsDetectedFromThem) {
  const std::vector<FamilyCase> cases = family_cases();
  ASSERT_EQ(cases.size(), model_families().size());
  for (const FamilyCase& k : cases) {
    SCOPED_TRACE(k.family);
    const HfFormat format = parse_hf_format(k.family);
    const model::ModelConfig c = model::config_from_json(k.model, "test");
    const json written = json::parse(config_to_hf(c, format, "float32").dump());
    EXPECT_EQ(written.at("model_type"), k.model_type);
    EXPECT_EQ(detect_hf_format(written), format);
    const model::ModelConfig back = config_from_hf(written, format, "written");
    EXPECT_EQ(model::config_to_json(back), model::config_to_json(c));
    // Writing the read config again gives the same keys, in the same order.
    EXPECT_EQ(config_to_hf(back, format, "float32").dump(), config_to_hf(c, format, "float32").dump());
  }
}

// Qwen3's sliding windows as transformers' Qwen3Config reads them, and back.
TEST(ModelFamilies, Qwen3SlidingWindowsFollowTransformersRules) {
  const json base{{"model_type", "qwen3"}, {"vocab_size", 10},  {"hidden_size", 16}, {"intermediate_size", 8},
                  {"num_hidden_layers", 4}, {"num_attention_heads", 2}, {"num_key_value_heads", 1}, {"head_dim", 8},
                  {"max_position_embeddings", 64}, {"sliding_window", 6}};
  auto kinds = [](const model::ModelConfig& c) { return model::layer_kinds_to_json(c.layer_types); };
  json j = base;
  j["use_sliding_window"] = true;
  j["max_window_layers"] = 1;  // no list: layers 1.. are sliding
  model::ModelConfig c = config_from_hf(j, HfFormat::qwen3, "test");
  EXPECT_EQ(kinds(c), json({"full_attention", "sliding_attention", "sliding_attention", "sliding_attention"}));
  EXPECT_EQ(c.sliding_window, 6);
  j["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention", "full_attention"};  // the list wins
  c = config_from_hf(j, HfFormat::qwen3, "test");
  EXPECT_EQ(kinds(c), j["layer_types"]);
  const json written = json::parse(config_to_hf(c, HfFormat::qwen3, "float32").dump());
  EXPECT_EQ(written.at("use_sliding_window"), true);
  EXPECT_EQ(written.at("sliding_window"), 6);
  EXPECT_EQ(written.at("max_window_layers"), 0);
  EXPECT_EQ(written.at("layer_types"), j["layer_types"]);
  EXPECT_EQ(model::config_to_json(config_from_hf(written, HfFormat::qwen3, "written")), model::config_to_json(c));
  j["use_sliding_window"] = false;  // transformers drops the window: every layer is full attention
  c = config_from_hf(j, HfFormat::qwen3, "test");
  EXPECT_TRUE(c.layer_types.empty());
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_EQ(json::parse(config_to_hf(c, HfFormat::qwen3, "float32").dump()).at("use_sliding_window"), false);
  j["use_sliding_window"] = true;
  j["layer_types"] = {"sliding_attention", "linear_attention", "full_attention", "full_attention"};
  try {
    config_from_hf(j, HfFormat::qwen3, "test");
    ADD_FAILURE() << "a linear_attention layer in a qwen3 config was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer_types\"[1]"), std::string::npos) << e.what();
  }
}

TEST(ModelFamilies, DetectionFollowsModelTypeThenThePapersKeys) {
  const std::vector<std::pair<json, const char*>> expected = {
      {{{"model_type", "qwen3"}}, "qwen3"},
      {{{"model_type", "qwen3_moe"}}, "qwen3_moe"},
      {{{"model_type", "qwen3"}, {"headwise_attn_output_gate", true}}, "paper"},
      {{{"model_type", "qwen3_moe"}, {"use_qk_norm", true}}, "paper"},
      {{{"model_type", "qwen3_next"}}, "qwen3_next"},
      {{{"model_type", "qwen3_5_text"}}, "qwen3_5"},
      {{{"model_type", "qwen3_5"}, {"text_config", {{"model_type", "qwen3_5_text"}}}}, "qwen3_5"},
      {{{"model_type", "qwen3_5_moe_text"}}, "qwen3_5_moe"},
      {{{"model_type", "qwen3_5_moe"}, {"text_config", json::object()}}, "qwen3_5_moe"},
      {{{"model_type", "llama"}}, "qwen3"},  // the fallback, which refuses the model_type by name
  };
  for (const auto& [hf, family] : expected) EXPECT_EQ(to_string(detect_hf_format(hf)), family) << hf.dump();
  const std::string refused = testing::error_of([] { config_from_hf({{"model_type", "llama"}}, HfFormat::qwen3, "c.json"); });
  EXPECT_TRUE(testing::contains(refused, "\"model_type\" is \"llama\"")) << refused;
  for (const ModelFamily* f : model_families()) EXPECT_TRUE(testing::contains(refused, f->name)) << refused;
}

TEST(ModelFamilies, QwenMoeInsistsOnExpertsWhileQwen3AndPaperKeepWritingThem) {
  const model::ModelConfig dense = model::config_from_json(base_model(), "test");
  const std::string refused = testing::error_of([&] { config_to_hf(dense, HfFormat::qwen3_moe, "float32"); });
  EXPECT_TRUE(testing::contains(refused, "export --format qwen3_moe: model config key \"moe\"")) << refused;
  const model::ModelConfig sparse = model::config_from_json(with_moe(base_model(), 0), "test");
  for (const HfFormat f : {HfFormat::qwen3, HfFormat::paper, HfFormat::qwen3_moe})
    EXPECT_EQ(config_to_hf(sparse, f, "float32")["model_type"], "qwen3_moe") << to_string(f);
  const std::string wrong_type = testing::error_of([] { config_from_hf({{"model_type", "qwen3"}}, HfFormat::qwen3_moe, "c.json"); });
  EXPECT_TRUE(testing::contains(wrong_type, "--format qwen3")) << wrong_type;
}

TEST(ModelFamilies, TheHelpTextsNameEveryRegisteredFamily) {
  const std::string formats = hf_format_names(" | ");
  const std::string refusal = testing::error_of([] { parse_hf_format("nope"); });
  const std::string archs = gguf_architecture_help();
  for (const ModelFamily* f : model_families()) {
    EXPECT_TRUE(testing::contains(formats, f->name)) << f->name;
    EXPECT_TRUE(testing::contains(refusal, f->name)) << f->name;
    if (f->gguf) {
      EXPECT_TRUE(testing::contains(archs, f->gguf->name)) << f->gguf->name;
    }
  }
}

// ---- A family added from this file alone: Qwen3 with its G1 gate as a separate projection
// "model.layers.{i}.self_attn.g_proj.weight" (model_type "qwen3_gproj", key
// "attn_output_gate": true). docs/architecture.md ("Adding a model family") walks through it.

constexpr const char* kGprojType = "qwen3_gproj";

Claim gproj_claim(const json& hf) {
  return hf.is_object() && hf.value("model_type", json()) == kGprojType ? Claim::model_type : Claim::none;
}

model::ModelConfig gproj_from_hf(const json& hf, const std::string& source) {
  HfReader r(hf, source);
  if (r.string("model_type", "") != kGprojType) fail(r.where("model_type"), ": not \"", kGprojType, "\"");
  read_activation_and_window(r);
  model::ModelConfig c;
  read_sizes(r, c, SizeDefaults{std::nullopt, std::nullopt});  // the keys every family shares
  c.rope_base = r.number("rope_theta", 10000.0);
  c.rope_dims = c.head_dim;
  c.rope_scaling.original_max_seq_len = c.max_seq_len;
  c.qk_norm = true;
  if (r.boolean("attn_output_gate", true)) c.gate.position = model::GatePosition::sdpa;  // G1, elementwise
  finish_config(r, c, source);
  return c;
}

nlohmann::ordered_json gproj_to_hf(const model::ModelConfig& c, const std::string& torch_dtype) {
  if (c.has_gate() && c.gate.granularity != model::GateGranularity::elementwise)
    refuse_export(kGprojType, "gate.granularity", "must be elementwise (g_proj has a row per query row)");
  nlohmann::ordered_json j;
  write_head(j, c, "Qwen3GprojForCausalLM", kGprojType);
  write_shape(j, c);
  j["rope_theta"] = c.rope_base;
  j["tie_word_embeddings"] = c.tie_embeddings;
  j["initializer_range"] = c.init_std;
  j["attn_output_gate"] = c.has_gate();
  j["torch_dtype"] = torch_dtype;
  return j;
}

std::vector<TensorMapping> gproj_tensors(const model::ModelConfig& c, const model::ParamLayout& layout,
                                         const std::string&, std::optional<bool>) {
  static const std::vector<NameRule> table = table_with({
      {"model.layers.{i}.self_attn.q_proj.weight", "model.layers.{i}.self_attn.q_proj.weight", RowPart::all},
      {"model.layers.{i}.self_attn.gate.weight", "model.layers.{i}.self_attn.g_proj.weight", RowPart::all},
  });
  return map_table_tensors(c, layout, table, kGprojType);
}

const ModelFamily kGprojFamily{.name = kGprojType,
                               .claim = gproj_claim,
                               .config_from_hf = gproj_from_hf,
                               .config_to_hf = gproj_to_hf,
                               .map_tensors = gproj_tensors,
                               .hybrid = false,
                               .stacked_experts = false,
                               .gguf = nullptr};

TEST(ModelFamilies, AToyFamilyWithASeparateGateProjectionIsAddedFromOneFile) {
  EXPECT_EQ(find_family(kGprojType), nullptr);
  testing::TempDir dir("family_gproj");
  json model = base_model();
  model["gate"] = g1_gate();
  Checkpoint ck{model::config_from_json(model, "test"), {}};
  ck.params = testing::random_vector<float>(model::ParamLayout(ck.config).total(), 31, 0.3);
  {
    const ScopedFamilyRegistration registered(kGprojFamily);
    const HfFormat gproj = parse_hf_format(kGprojType);  // --format knows it
    EXPECT_TRUE(testing::contains(hf_format_names(" | "), kGprojType));
    export_hf(ck, gproj, kernels::ElementType::f32, dir.path().string());
    const SafetensorsReader file((dir / "model.safetensors").string());
    EXPECT_TRUE(file.has("model.layers.3.self_attn.g_proj.weight"));
    EXPECT_FALSE(file.has("model.layers.3.self_attn.gate.weight"));
    const ImportedModel back = import_hf(dir.path().string(), std::nullopt);  // detected by model_type
    EXPECT_EQ(back.format, gproj);
    EXPECT_EQ(model::config_to_json(back.checkpoint.config), model::config_to_json(ck.config));
    EXPECT_EQ(back.checkpoint.params, ck.params);
    // The families it joined are untouched: Qwen3 still refuses the gate.
    EXPECT_TRUE(testing::contains(testing::error_of([&] { export_hf(ck, HfFormat::qwen3, kernels::ElementType::f32, "unused"); }),
                                  "\"gate\""));
  }
  EXPECT_EQ(find_family(kGprojType), nullptr);  // registered for the scope only
  EXPECT_EQ(registered_names().size(), 6u);
}

}  // namespace
}  // namespace gatedlm::io
