// gatedlm's block conversions (kernels/element_types.h: Q4_0 ... IQ4_XS) against ggml's own,
// from the libggml-base.so that npm's @node-llama-cpp/linux-x64 ships, loaded at run time:
//   - quantising: gatedlm's bytes against ggml_quantize_chunk's without an importance
//     matrix (what llama_model_quantize writes), which must be identical;
//   - dequantising: gatedlm's fp32 values against ggml's dequantize_row_* on the same
//     blocks (ggml's own and random bytes with finite scales), which must be identical bits.
// Inputs: rows of several distributions (normal, heavy-tailed with outliers, all positive,
// one-sided, tiny, constant, zero, with exact zeros mixed in), several rows each.
//
//   ggml_blocks_probe LIBDIR      prints one line per type; exit 0 when all agree, 1 when not
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/element_types.h"
#include "kernels/half_float.h"

namespace {

namespace k = gatedlm::kernels;

using QuantizeChunk = size_t (*)(int type, const float* src, void* dst, int64_t start, int64_t nrows, int64_t n_per_row,
                                 const float* imatrix);
using DequantizeRow = void (*)(const void* blocks, float* out, int64_t k);

// ggml's dequantiser symbol of each type (ggml-quants.h).
const char* dequantizer_symbol(k::ElementType t) {
  switch (t) {
    case k::ElementType::q4_0: return "dequantize_row_q4_0";
    case k::ElementType::q4_1: return "dequantize_row_q4_1";
    case k::ElementType::q5_0: return "dequantize_row_q5_0";
    case k::ElementType::q5_1: return "dequantize_row_q5_1";
    case k::ElementType::q8_0: return "dequantize_row_q8_0";
    case k::ElementType::q2_k: return "dequantize_row_q2_K";
    case k::ElementType::q3_k: return "dequantize_row_q3_K";
    case k::ElementType::q4_k: return "dequantize_row_q4_K";
    case k::ElementType::q5_k: return "dequantize_row_q5_K";
    case k::ElementType::q6_k: return "dequantize_row_q6_K";
    case k::ElementType::iq4_nl: return "dequantize_row_iq4_nl";
    case k::ElementType::iq4_xs: return "dequantize_row_iq4_xs";
    default: return nullptr;
  }
}

// Rows of n values of one distribution (`kind`).
std::vector<float> sample_rows(int kind, int64_t rows, int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::student_t_distribution<float> heavy(2.0f);
  std::vector<float> x(static_cast<size_t>(rows * n));
  for (size_t i = 0; i < x.size(); ++i) {
    switch (kind) {
      case 0: x[i] = normal(rng) * 0.02f; break;                              // weights
      case 1: x[i] = heavy(rng) * (i % 97 == 0 ? 40.0f : 1.0f); break;        // outliers
      case 2: x[i] = std::fabs(normal(rng)) + 0.5f; break;                    // all positive
      case 3: x[i] = -std::fabs(normal(rng)) * 3.0f; break;                   // all negative
      case 4: x[i] = normal(rng) * 1e-6f; break;                              // tiny
      case 5: x[i] = 0.75f; break;                                            // constant
      case 6: x[i] = 0.0f; break;                                             // zero
      default: x[i] = (i % 3 == 0) ? 0.0f : normal(rng) * (1.0f + static_cast<float>(i % 256) / 16.0f);
    }
  }
  return x;
}

// Random blocks with finite fp16 scales: random bytes, every 16-bit field that is a scale
// forced finite by clearing its exponent's top bit (scales sit at even offsets in every
// format; clearing bit 14 of any aligned 16-bit word keeps all of them finite).
std::vector<uint8_t> random_blocks(int64_t bytes, std::mt19937& rng) {
  std::vector<uint8_t> b(static_cast<size_t>(bytes));
  for (auto& v : b) v = static_cast<uint8_t>(rng());
  for (size_t i = 1; i < b.size(); i += 2) b[i] &= 0xBF;
  return b;
}

struct Counts {
  int64_t quantized_rows = 0, byte_mismatches = 0, value_mismatches = 0;
  std::string first;
};

void compare_quantized(const k::ElementTraits& t, QuantizeChunk quantize, const std::vector<float>& x, int64_t rows,
                       int64_t n, Counts& c) {
  const int64_t row_bytes = k::element_row_bytes(t.type, n);
  std::vector<uint8_t> ours(static_cast<size_t>(rows * row_bytes)), theirs(ours.size());
  for (int64_t r = 0; r < rows; ++r) k::element_from_f32(t.type, ours.data() + r * row_bytes, x.data() + r * n, n);
  quantize(static_cast<int>(t.type), x.data(), theirs.data(), 0, rows, n, nullptr);
  for (int64_t r = 0; r < rows; ++r, ++c.quantized_rows) {
    if (std::memcmp(ours.data() + r * row_bytes, theirs.data() + r * row_bytes, static_cast<size_t>(row_bytes)) == 0)
      continue;
    ++c.byte_mismatches;
    if (c.first.empty()) {
      int64_t at = 0;
      while (ours[r * row_bytes + at] == theirs[r * row_bytes + at]) ++at;
      c.first = "row " + std::to_string(r) + " of " + std::to_string(n) + " values: byte " + std::to_string(at) +
                " is " + std::to_string(ours[r * row_bytes + at]) + ", ggml's " + std::to_string(theirs[r * row_bytes + at]);
    }
  }
}

void compare_dequantized(const k::ElementTraits& t, DequantizeRow dequantize, const std::vector<uint8_t>& blocks,
                         int64_t n, Counts& c) {
  std::vector<float> ours(static_cast<size_t>(n)), theirs(static_cast<size_t>(n));
  k::element_to_f32(t.type, ours.data(), blocks.data(), n);
  dequantize(blocks.data(), theirs.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    if (std::memcmp(&ours[i], &theirs[i], 4) == 0 || (std::isnan(ours[i]) && std::isnan(theirs[i]))) continue;
    ++c.value_mismatches;
    if (c.first.empty())
      c.first = "value " + std::to_string(i) + " is " + std::to_string(ours[i]) + ", ggml's " + std::to_string(theirs[i]);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: ggml_blocks_probe LIBDIR\n");
    return 2;
  }
  void* ggml = dlopen((std::string(argv[1]) + "/libggml-base.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!ggml) {
    std::fprintf(stderr, "ggml_blocks_probe: cannot load libggml-base.so from %s (%s)\n", argv[1], dlerror());
    return 2;
  }
  const auto quantize = reinterpret_cast<QuantizeChunk>(dlsym(ggml, "ggml_quantize_chunk"));
  if (!quantize) {
    std::fprintf(stderr, "ggml_blocks_probe: ggml_quantize_chunk not found\n");
    return 2;
  }
  std::mt19937 rng(2026);
  bool all_agree = true;
  for (const k::ElementTraits& t : k::element_types()) {
    const char* symbol = dequantizer_symbol(t.type);
    if (!symbol || !t.to_f32 || !t.from_f32) continue;
    const auto dequantize = reinterpret_cast<DequantizeRow>(dlsym(ggml, symbol));
    if (!dequantize) {
      std::fprintf(stderr, "ggml_blocks_probe: %s not found\n", symbol);
      return 2;
    }
    Counts c;
    for (int64_t n : {t.block_values, 4 * t.block_values, std::max<int64_t>(t.block_values, 1024) * 3})
      for (int kind = 0; kind < 8; ++kind) {
        const int64_t rows = 5;
        compare_quantized(t, quantize, sample_rows(kind, rows, n, rng), rows, n, c);
      }
    for (int trial = 0; trial < 200; ++trial)
      compare_dequantized(t, dequantize, random_blocks(k::element_row_bytes(t.type, 4 * t.block_values), rng),
                          4 * t.block_values, c);
    const bool agree = c.byte_mismatches == 0 && c.value_mismatches == 0;
    all_agree = all_agree && agree;
    std::printf("%-7s %s: %lld rows quantised (%lld differ), 200 x %lld random values dequantised (%lld differ)%s%s\n",
                t.ggml_name, agree ? "same as ggml" : "DIFFERS", static_cast<long long>(c.quantized_rows),
                static_cast<long long>(c.byte_mismatches), static_cast<long long>(4 * t.block_values),
                static_cast<long long>(c.value_mismatches), c.first.empty() ? "" : "; first: ", c.first.c_str());
  }
  return all_agree ? 0 : 1;
}
