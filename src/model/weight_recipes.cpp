#include "model/weight_recipes.h"

#include "core/error.h"

namespace gatedlm::model {

namespace {

using T = kernels::ElementType;

// llama.h's numbers. A uniform K-quant has the number of the _S mix (the nearest to one type
// throughout); the mixes follow, so that find_recipe_by_ftype finds llama.cpp's name first
// for those numbers.
constexpr WeightRecipe kRecipes[] = {
    {"f32", 0, T::f32, true, true},           {"f16", 1, T::f16, true, true},
    {"bf16", 32, T::bf16, true, true},        {"q8_0", 7, T::q8_0, true, true},
    {"q6_k", 18, T::q6_k, true, true},        {"q5_k", 16, T::q5_k, true, true},
    {"q5_1", 9, T::q5_1, true, true},         {"q5_0", 8, T::q5_0, true, true},
    {"q4_k", 14, T::q4_k, true, true},        {"iq4_xs", 30, T::iq4_xs, true, true},
    {"iq4_nl", 25, T::iq4_nl, true, true},    {"q4_1", 3, T::q4_1, true, true},
    {"q4_0", 2, T::q4_0, true, true},         {"q3_k", 11, T::q3_k, true, true},
    {"q2_k", 10, T::q2_k, true, true},        {"q5_k_m", 17, T::q5_k, false, true},
    {"q4_k_m", 15, T::q4_k, false, true},     {"q3_k_m", 12, T::q3_k, false, true},
    {"q5_k_s", 16, T::q5_k, false, false},    {"q4_k_s", 14, T::q4_k, false, false},
    {"q3_k_s", 11, T::q3_k, false, false},    {"q3_k_l", 13, T::q3_k, false, false},
    {"q2_k_s", 21, T::q2_k, false, false},
};

// llama-quant.cpp's use_more_bits: the first and last eighth of the layers and every third
// one between them.
bool use_more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

}  // namespace

std::span<const WeightRecipe> weight_recipes() { return kRecipes; }

const WeightRecipe* find_recipe(const std::string& name) {
  for (const WeightRecipe& r : kRecipes)
    if (name == r.name) return &r;
  return nullptr;
}

const WeightRecipe* find_recipe_by_ftype(uint32_t ftype) {
  const WeightRecipe* found = nullptr;
  for (const WeightRecipe& r : kRecipes)
    if (r.llama_ftype == ftype && (!found || found->uniform)) found = &r;
  return found;
}

const WeightRecipe& uniform_recipe(kernels::ElementType type) {
  for (const WeightRecipe& r : kRecipes)
    if (r.uniform && r.base == type) return r;
  fail("no llama.cpp file type holds ", kernels::element_name(type), " throughout");
}

const WeightRecipe& parse_recipe(const std::string& name, const std::string& flag, bool (*accepts)(kernels::ElementType)) {
  std::string names;
  for (const WeightRecipe& r : kRecipes) {
    if (!r.written || (r.uniform && !accepts(r.base))) continue;
    if (name == r.name) return r;
    names += cat(names.empty() ? "" : ", ", r.name);
  }
  fail(flag, " ", name, ": not one of the types taken here (", names, ")");
}

T mix_tensor_type(const WeightRecipe& recipe, TensorRole role, const TensorPlace& p) {
  const bool q3_m = recipe.llama_ftype == 12, q4_m = recipe.llama_ftype == 15, q5_m = recipe.llama_ftype == 17;
  if (recipe.uniform || !recipe.written) fail("mix_tensor_type: ", recipe.name, " is not a mix gatedlm writes");
  const bool eight_experts = p.n_experts == 8;  // llama.cpp's Mixtral rules
  switch (role) {
    case TensorRole::output:
      if (p.cols % kernels::element_traits(recipe.base).block_values != 0) return T::q8_0;
      return recipe.base == T::q8_0 ? T::q8_0 : T::q6_k;
    case TensorRole::attn_v: {
      T type = recipe.base;
      if (q3_m) type = p.attn_v_index < 2 ? T::q5_k : T::q4_k;
      else if ((q4_m || q5_m) && use_more_bits(p.attn_v_index, p.attn_v_count)) type = T::q6_k;
      return eight_experts ? T::q8_0 : type;
    }
    case TensorRole::attn_k: return eight_experts ? T::q8_0 : recipe.base;
    case TensorRole::ffn_down:
      if (q3_m) return p.ffn_down_layer < p.n_layers / 16 ? T::q5_k : T::q4_k;
      return (q4_m || q5_m) && use_more_bits(p.ffn_down_layer, p.n_layers) ? T::q6_k : recipe.base;
    case TensorRole::attn_output:
      if (eight_experts) return q3_m || q4_m ? T::q5_k : recipe.base;
      return q3_m ? T::q4_k : recipe.base;
    default: return recipe.base;
  }
}

}  // namespace gatedlm::model
