#include "io/gguf_encode.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "core/error.h"
#include "io/gguf_tables.h"
#include "model/weight_recipes.h"
#include "kernels/element_types.h"
#include "kernels/quant_blocks.h"

namespace gatedlm::io {

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}
bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// llama.cpp keeps these in F32 whatever the file type (its converter's list and
// llama-quantize's tensor_allows_quantization agree on them for the architectures here).
bool keeps_f32(const std::string& name, const std::vector<int64_t>& shape) {
  return shape.size() < 2 || !ends_with(name, ".weight") || ends_with(name, "_norm.weight") ||
         contains(name, "ffn_gate_inp.weight") || contains(name, "ssm_conv1d");
}

// llama-quantize's tensor category of a GGUF name (model::TensorRole); `tied`: token_embd is
// also the output matrix.
model::TensorRole tensor_role(const std::string& name, bool tied) {
  using R = model::TensorRole;
  if (name == "output.weight" || (tied && name == "token_embd.weight")) return R::output;
  if (name == "token_embd.weight") return R::token_embd;
  if (contains(name, "attn_qkv.weight") || contains(name, "attn_kv_b.weight") || contains(name, "attn_v.weight")) return R::attn_v;
  if (contains(name, "attn_k.weight")) return R::attn_k;
  if (contains(name, "attn_q.weight")) return R::attn_q;
  if (contains(name, "attn_output.weight")) return R::attn_output;
  if (contains(name, "ffn_down")) return R::ffn_down;
  return R::other;
}

// The layer of "blk.<l>...." (0 for other names).
int64_t layer_of(const std::string& name) {
  return name.rfind("blk.", 0) == 0 ? std::strtoll(name.c_str() + 4, nullptr, 10) : 0;
}

// The tensors in llama-quantize's order: by layer (the others first), then by name.
std::vector<size_t> quantize_order(const std::vector<GgufTensor>& tensors) {
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto key = [&](size_t i) { return std::pair(tensors[i].name.rfind("blk.", 0) == 0 ? layer_of(tensors[i].name) : -1, tensors[i].name); };
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(a) < key(b); });
  return order;
}

// A mix's type for each tensor (model::mix_tensor_type), then llama.cpp's fallbacks.
std::vector<kernels::ElementType> mix_types(const std::vector<GgufTensor>& tensors, const model::ModelConfig& c,
                                            const model::WeightRecipe& recipe) {
  model::TensorPlace place;
  place.n_layers = c.n_layers;
  place.n_experts = c.moe.enabled() ? c.moe.n_experts : 0;
  for (const GgufTensor& t : tensors) place.attn_v_count += tensor_role(t.name, c.tie_embeddings) == model::TensorRole::attn_v;
  std::vector<kernels::ElementType> types(tensors.size(), kernels::ElementType::f32);
  int64_t ffn_down_index = 0;
  for (const size_t i : quantize_order(tensors)) {
    const GgufTensor& t = tensors[i];
    if (keeps_f32(t.name, t.shape)) continue;
    const model::TensorRole role = tensor_role(t.name, c.tie_embeddings);
    place.cols = t.shape.back();
    place.ffn_down_layer = place.n_experts > 1 ? layer_of(t.name) : ffn_down_index;
    kernels::ElementType type = model::mix_tensor_type(recipe, role, place);
    if (place.cols % kernels::kQuantBlockValues != 0) type = kernels::ElementType::f16;
    else if (place.cols % kernels::element_traits(type).block_values != 0) type = kernels::narrow_row_type(type);
    types[i] = type;
    place.attn_v_index += role == model::TensorRole::attn_v;
    ffn_down_index += role == model::TensorRole::ffn_down;
  }
  return types;
}

}  // namespace

std::vector<kernels::ElementType> gguf_tensor_types(const std::vector<GgufTensor>& tensors, const model::ModelConfig& c,
                                                    const model::WeightRecipe& recipe) {
  if (!recipe.uniform) return mix_types(tensors, c, recipe);
  std::vector<kernels::ElementType> types;
  for (const GgufTensor& t : tensors) {
    const bool output = t.name == "output.weight" || (c.tie_embeddings && t.name == "token_embd.weight");
    types.push_back(gguf_stored_type(t.name, t.shape, recipe.base, output));
  }
  return types;
}

model::WeightFormats recipe_formats(const model::ModelConfig& c, const model::WeightRecipe& recipe) {
  const model::ParamLayout layout(c);
  if (recipe.uniform) return model::uniform_formats(layout, recipe.base);
  std::vector<GgufTensor> tensors;
  try {
    tensors = gguf_tensors(layout, c, gguf_architecture(c), false);
  } catch (const Error& e) {
    fail(recipe.name, " chooses a type per tensor by llama.cpp's tensor names, and this model has none: ", e.what());
  }
  const std::vector<kernels::ElementType> types = gguf_tensor_types(tensors, c, recipe);
  model::WeightFormats formats{recipe.name, {}};
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!kernels::element_traits(types[i]).products) continue;
    for (const GgufRun& run : tensors[i].runs)
      if (run.spec && model::quantized_tensor(*run.spec) && run.spec->shape.back() == tensors[i].shape.back())
        formats.tensors.emplace(run.spec->name, types[i]);
  }
  return formats;
}

const model::WeightRecipe& parse_gguf_dtype(const std::string& name) {
  return model::parse_recipe(name, "--dtype", [](kernels::ElementType) { return true; });
}

uint32_t gguf_file_type(kernels::ElementType dtype) { return model::uniform_recipe(dtype).llama_ftype; }

kernels::ElementType gguf_stored_type(const std::string& name, const std::vector<int64_t>& shape,
                                      kernels::ElementType dtype, bool output) {
  if (dtype == kernels::ElementType::f32 || keeps_f32(name, shape)) return kernels::ElementType::f32;
  if (dtype == kernels::ElementType::f16) return kernels::ElementType::f16;
  if (dtype == kernels::ElementType::bf16) return kernels::ElementType::bf16;
  if (shape.back() % kernels::kQuantBlockValues != 0) return kernels::ElementType::f16;
  if (output && dtype == kernels::ElementType::q4_0) return kernels::ElementType::q8_0;
  return shape.back() % kernels::element_traits(dtype).block_values == 0 ? dtype : kernels::narrow_row_type(dtype);
}

void encode_ggml_rows(std::string& out, const float* values, int64_t rows, int64_t k, kernels::ElementType type) {
  const int64_t row_bytes = kernels::element_row_bytes(type, k);
  const size_t at = out.size();
  out.resize(at + static_cast<size_t>(rows * row_bytes));
  char* dst = out.data() + at;
  // Rows are independent (IQ4_XS's scale search makes a 1B export minutes of work on one core).
#pragma omp parallel for schedule(dynamic, 16)
  for (int64_t r = 0; r < rows; ++r) kernels::element_from_f32(type, dst + r * row_bytes, values + r * k, k);
}

}  // namespace gatedlm::io
