#pragma once
// Weights held in another form than the fp32 values at their address: a model loaded
// from a quantised checkpoint (model/quantized_weights.h) keeps its matrices as GGUF
// blocks and registers itself here; matmul<float> and batched_matmul<float> hand every
// product whose B lies in a registered source's region to that source, which multiplies
// by its own copy (or says no, and the product runs on the fp32 values as usual). No call
// site of a product changes: the source is found by B's address.
#include <cstdint>

#include "kernels/matmul.h"

namespace gatedlm::kernels {

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  // Computes C as matmul<float>(C, A, B, shape) would (shape's strides resolved, M, N and
  // K positive) when B lies in weights this source holds; false leaves C untouched.
  virtual bool product(float* C, const float* A, const float* B, const MatmulShape& shape) = 0;
  // Whether B points into weights this source holds (batched_matmul then goes item by item).
  virtual bool holds(const float* B) const = 0;
};

// At most kMaxWeightSources at once (one per loaded quantised model); registering more
// fails. A source must be unregistered before it or its region goes away, and while no
// product runs on its region.
inline constexpr int kMaxWeightSources = 8;
void register_weight_source(WeightSource* source);
void unregister_weight_source(WeightSource* source);

// matmul.cpp's hook: true when a registered source computed the product.
bool weight_source_product(float* C, const float* A, const float* B, const MatmulShape& shape);
bool weight_source_holds(const float* B);

}  // namespace gatedlm::kernels
