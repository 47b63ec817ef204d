#pragma once
// Weight recipes: what a model's weights as a whole are called, and llama.cpp's file type
// (general.file_type, llama.h's LLAMA_FTYPE_*) for each. A recipe is either one element type
// for every quantised tensor ("q4_k": model::uniform_formats), or one of llama.cpp's mixes,
// which choose a type per tensor ("q4_k_m"). A GGUF file's general.file_type names its
// weights in messages and JSON (find_recipe_by_ftype).
#include <cstdint>
#include <span>
#include <string>

#include "kernels/element_types.h"

namespace gatedlm::model {

struct WeightRecipe {
  const char* name;          // as --type and --dtype take it: "q8_0", "q4_k_m", ...
  uint32_t llama_ftype;      // LLAMA_FTYPE_*: MOSTLY_Q4_K_M is 15
  kernels::ElementType base;  // the type of most matrices
  // One type for every quantised tensor (gatedlm's own, named after the type); else one of
  // llama.cpp's mixes, named as llama-quantize names them.
  bool uniform;
  // A mix gatedlm writes (mix_tensor_type); the others only name the files that hold them.
  bool written;
};

// Every recipe, uniform ones first.
std::span<const WeightRecipe> weight_recipes();
// By name; null when none has it.
const WeightRecipe* find_recipe(const std::string& name);
// The recipe a GGUF file's general.file_type names (llama.cpp's name where it has a mix of
// that number, e.g. 14 is "q4_k_s"); null for a number without one.
const WeightRecipe* find_recipe_by_ftype(uint32_t ftype);
// The uniform recipe of `type`; throws naming the type when llama.cpp has no file type for it.
const WeightRecipe& uniform_recipe(kernels::ElementType type);
// The recipe named `name` among the uniform ones whose type `accepts` and the written mixes;
// throws naming `flag`, the value and the accepted names.
const WeightRecipe& parse_recipe(const std::string& name, const std::string& flag, bool (*accepts)(kernels::ElementType));

// How llama.cpp's mixes treat a tensor: its role (llama-quantize's tensor categories, from the
// GGUF name: attn_v stands for attn_v, attn_qkv and attn_kv_b, ffn_down for ffn_down,
// ffn_down_exps and ffn_down_shexp; output for output.weight, and token_embd.weight when the
// embeddings are tied) and its place among its kind.
enum class TensorRole { token_embd, output, attn_q, attn_k, attn_v, attn_output, ffn_down, other };
struct TensorPlace {
  int64_t attn_v_index = 0, attn_v_count = 0;  // among the attn_v tensors, in (layer, name) order
  int64_t ffn_down_layer = 0;                  // its layer (MoE models) or its index among the ffn_down
  int64_t n_layers = 0, n_experts = 0;
  int64_t cols = 0;                            // its row width
};
// The type llama.cpp's mix `recipe` (a written one) gives a tensor, before the fallback for rows
// that are not whole blocks of it (kernels::narrow_row_type); llama-quant.cpp's
// llama_tensor_get_type for Q3_K_M, Q4_K_M and Q5_K_M (docs/quantization.md states the rules).
kernels::ElementType mix_tensor_type(const WeightRecipe& recipe, TensorRole role, const TensorPlace& place);

}  // namespace gatedlm::model
