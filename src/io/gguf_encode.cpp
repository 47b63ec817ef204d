#include "io/gguf_encode.h"

#include "core/error.h"
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

}  // namespace

kernels::ElementType parse_gguf_dtype(const std::string& name) {
  return kernels::parse_element_type(name, "--dtype", kGgufFileTypes);
}

uint32_t gguf_file_type(kernels::ElementType dtype) {
  using T = kernels::ElementType;
  switch (dtype) {
    case T::f32: return 0;
    case T::f16: return 1;
    case T::q4_0: return 2;
    case T::q4_1: return 3;
    case T::q8_0: return 7;
    case T::q5_0: return 8;
    case T::q5_1: return 9;
    case T::q2_k: return 10;
    case T::q3_k: return 11;
    case T::q4_k: return 14;
    case T::q5_k: return 16;
    case T::q6_k: return 18;
    case T::iq4_nl: return 25;
    case T::iq4_xs: return 30;
    case T::bf16: return 32;
    default: fail("gguf: no llama.cpp file type for ", kernels::element_name(dtype));
  }
}

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
  for (int64_t r = 0; r < rows; ++r) kernels::element_from_f32(type, dst + r * row_bytes, values + r * k, k);
}

}  // namespace gatedlm::io
