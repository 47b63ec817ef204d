#include "io/gguf_encode.h"

#include <cstring>

#include "core/error.h"
#include "io/half_float.h"
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

kernels::QuantFormat quant_format(GgmlType type) {
  switch (type) {
    case GgmlType::bf16: return kernels::QuantFormat::bf16;
    case GgmlType::q8_0: return kernels::QuantFormat::q8_0;
    case GgmlType::q4_0: return kernels::QuantFormat::q4_0;
    default: break;
  }
  fail("gguf: ggml type ", ggml_type_name(type), " is no quantised format");
}

}  // namespace

GgufDtype parse_gguf_dtype(const std::string& name) {
  if (name == "f32") return GgufDtype::f32;
  if (name == "f16") return GgufDtype::f16;
  if (name == "bf16") return GgufDtype::bf16;
  if (name == "q8_0") return GgufDtype::q8_0;
  if (name == "q4_0") return GgufDtype::q4_0;
  fail("--dtype: unknown value \"", name, "\" for --format gguf (expected f32|f16|bf16|q8_0|q4_0)");
}

uint32_t gguf_file_type(GgufDtype dtype) {
  switch (dtype) {
    case GgufDtype::f32: return 0;
    case GgufDtype::f16: return 1;
    case GgufDtype::q4_0: return 2;
    case GgufDtype::q8_0: return 7;
    case GgufDtype::bf16: return 32;
  }
  return 0;
}

const char* ggml_type_name(GgmlType type) {
  switch (type) {
    case GgmlType::f32: return "F32";
    case GgmlType::f16: return "F16";
    case GgmlType::q4_0: return "Q4_0";
    case GgmlType::q8_0: return "Q8_0";
    case GgmlType::bf16: return "BF16";
  }
  return "unknown";
}

GgmlType gguf_stored_type(const std::string& name, const std::vector<int64_t>& shape, GgufDtype dtype, bool output) {
  if (dtype == GgufDtype::f32 || keeps_f32(name, shape)) return GgmlType::f32;
  if (dtype == GgufDtype::f16) return GgmlType::f16;
  if (dtype == GgufDtype::bf16) return GgmlType::bf16;
  if (shape.back() % kernels::kQuantBlockValues != 0) return GgmlType::f16;
  if (dtype == GgufDtype::q8_0 || output) return GgmlType::q8_0;
  return GgmlType::q4_0;
}

int64_t ggml_row_bytes(GgmlType type, int64_t k) {
  if (type == GgmlType::f32) return 4 * k;
  if (type == GgmlType::f16) return 2 * k;
  return kernels::quant_row_bytes(quant_format(type), k);
}

void encode_ggml_rows(std::string& out, const float* values, int64_t rows, int64_t k, GgmlType type) {
  const int64_t row_bytes = ggml_row_bytes(type, k);
  const size_t at = out.size();
  out.resize(at + static_cast<size_t>(rows * row_bytes));
  char* dst = out.data() + at;
  if (type == GgmlType::f32) {
    std::memcpy(dst, values, static_cast<size_t>(rows * k) * 4);
    return;
  }
  if (type == GgmlType::f16) {
    for (int64_t i = 0; i < rows * k; ++i) {
      const uint16_t h = f32_to_f16(values[i]);
      std::memcpy(dst + 2 * i, &h, 2);
    }
    return;
  }
  for (int64_t r = 0; r < rows; ++r) kernels::quantize_row(quant_format(type), dst + r * row_bytes, values + r * k, k);
}

}  // namespace gatedlm::io
