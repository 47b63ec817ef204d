// Weight recipes (model/weight_recipes.h) and the per-tensor types of llama.cpp's mixes
// (io/gguf_encode.h's recipe_formats): llama-quant.cpp's rules for Q3_K_M, Q4_K_M and Q5_K_M
// on hand-picked layers, its fallback on narrow rows, eight experts, and the names of
// llama.cpp's file types. tests/reference/test_quant_llama.py checks the same choices
// against llama.cpp's own quantiser, tensor for tensor.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "io/gguf_encode.h"
#include "model/config.h"
#include "model/weight_recipes.h"
#include "test_files.h"

namespace gatedlm::model {
namespace {

using nlohmann::json;
using T = kernels::ElementType;

ModelConfig config(json extra) {
  json j{{"vocab_size", 258}, {"d_model", 256}, {"n_layers", 8}, {"n_heads", 4}, {"n_kv_heads", 2},
         {"head_dim", 64}, {"ffn_hidden", 512}, {"max_seq_len", 64}, {"tie_embeddings", false}};
  j.update(extra);
  return config_from_json(j, "test");
}

T type_of(const WeightFormats& f, const std::string& name) {
  const auto it = f.tensors.find(name);
  return it == f.tensors.end() ? T::f32 : it->second;
}

std::string layer(int l, const char* tensor) { return "model.layers." + std::to_string(l) + "." + tensor; }

TEST(WeightRecipes, Q4KMGivesMoreBitsToTheLayersLlamaCppPicks) {
  const WeightFormats f = io::recipe_formats(config(json::object()), *find_recipe("q4_k_m"));
  EXPECT_EQ(f.name, "q4_k_m");
  EXPECT_EQ(type_of(f, "lm_head.weight"), T::q6_k);
  EXPECT_EQ(type_of(f, "model.embed_tokens.weight"), T::q4_k) << "untied: the embedding keeps the base type";
  for (int l = 0; l < 8; ++l) {
    const T more = l == 0 || l == 3 || l == 6 || l == 7 ? T::q6_k : T::q4_k;
    EXPECT_EQ(type_of(f, layer(l, "self_attn.v_proj.weight")), more) << l;
    EXPECT_EQ(type_of(f, layer(l, "mlp.down_proj.weight")), more) << l;
    for (const char* base : {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.o_proj.weight",
                             "mlp.gate_proj.weight", "mlp.up_proj.weight"})
      EXPECT_EQ(type_of(f, layer(l, base)), T::q4_k) << l << " " << base;
  }
  EXPECT_EQ(type_of(f, layer(0, "input_layernorm.weight")), T::f32);
}

TEST(WeightRecipes, Q3KMAndQ5KM) {
  const WeightFormats q3 = io::recipe_formats(config({{"n_layers", 17}}), *find_recipe("q3_k_m"));
  EXPECT_EQ(type_of(q3, layer(0, "self_attn.v_proj.weight")), T::q5_k);
  EXPECT_EQ(type_of(q3, layer(1, "self_attn.v_proj.weight")), T::q5_k);
  EXPECT_EQ(type_of(q3, layer(2, "self_attn.v_proj.weight")), T::q4_k);
  EXPECT_EQ(type_of(q3, layer(0, "mlp.down_proj.weight")), T::q5_k) << "the first n/16 layers";
  EXPECT_EQ(type_of(q3, layer(1, "mlp.down_proj.weight")), T::q4_k);
  EXPECT_EQ(type_of(q3, layer(5, "self_attn.o_proj.weight")), T::q4_k);
  EXPECT_EQ(type_of(q3, layer(5, "self_attn.q_proj.weight")), T::q3_k);
  EXPECT_EQ(type_of(q3, "lm_head.weight"), T::q6_k);
  const WeightFormats q5 = io::recipe_formats(config({{"tie_embeddings", true}}), *find_recipe("q5_k_m"));
  EXPECT_EQ(type_of(q5, "model.embed_tokens.weight"), T::q6_k) << "tied: the output matrix's rule";
  EXPECT_EQ(type_of(q5, layer(3, "self_attn.v_proj.weight")), T::q6_k);
  EXPECT_EQ(type_of(q5, layer(4, "self_attn.v_proj.weight")), T::q5_k);
}

TEST(WeightRecipes, EightExpertsAndNarrowRows) {
  const WeightFormats moe = io::recipe_formats(
      config({{"ffn_hidden", 0}, {"moe", {{"n_experts", 8}, {"top_k", 2}, {"expert_hidden", 256}}}}), *find_recipe("q4_k_m"));
  EXPECT_EQ(type_of(moe, layer(1, "self_attn.v_proj.weight")), T::q8_0);
  EXPECT_EQ(type_of(moe, layer(1, "self_attn.k_proj.weight")), T::q8_0);
  EXPECT_EQ(type_of(moe, layer(1, "self_attn.o_proj.weight")), T::q5_k);
  EXPECT_EQ(type_of(moe, layer(7, "mlp.experts.3.down_proj.weight")), T::q6_k) << "layer 7 of 8 by its name";
  EXPECT_EQ(type_of(moe, layer(1, "mlp.gate.weight")), T::f32) << "the router";
  // 64-wide rows: Q6_K falls back to Q8_0, Q4_K to Q5_0; the output matrix is Q8_0.
  const WeightFormats narrow =
      io::recipe_formats(config({{"d_model", 64}, {"head_dim", 16}, {"ffn_hidden", 128}}), *find_recipe("q4_k_m"));
  EXPECT_EQ(type_of(narrow, layer(0, "self_attn.v_proj.weight")), T::q8_0);
  EXPECT_EQ(type_of(narrow, layer(1, "self_attn.v_proj.weight")), T::q5_0);
  EXPECT_EQ(type_of(narrow, "lm_head.weight"), T::q8_0);
}

TEST(WeightRecipes, FileTypesAndNames) {
  EXPECT_STREQ(find_recipe_by_ftype(15)->name, "q4_k_m");
  EXPECT_STREQ(find_recipe_by_ftype(14)->name, "q4_k_s") << "llama.cpp's name for its number";
  EXPECT_STREQ(find_recipe_by_ftype(7)->name, "q8_0");
  EXPECT_EQ(find_recipe_by_ftype(19), nullptr);
  EXPECT_EQ(uniform_recipe(T::q4_k).llama_ftype, 14u);
  EXPECT_EQ(uniform_recipe(T::bf16).llama_ftype, 32u);
  const auto products = [](T t) { return kernels::element_traits(t).products; };
  EXPECT_STREQ(parse_recipe("q3_k_m", "--type", products).name, "q3_k_m");
  const std::string msg = testing::error_of([&] { parse_recipe("q4_k_s", "--type", products); });
  EXPECT_TRUE(testing::contains(msg, "--type q4_k_s") && testing::contains(msg, "q4_k_m") &&
              !testing::contains(msg, "f32"))
      << msg;
  EXPECT_TRUE(testing::contains(testing::error_of([&] { parse_recipe("f16", "--type", products); }), "f16"));
}

}  // namespace
}  // namespace gatedlm::model
