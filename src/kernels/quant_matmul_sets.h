#pragma once
// The active kernel set's quantised products (dispatch.cpp), for quant_matmul.cpp, which
// checks the arguments first: the path the set takes for `automatic`, a product through
// a path (automatic resolved by the set), whole rows expanded to fp32.
#include <cstdint>

#include "kernels/quant_weights.h"

namespace gatedlm::kernels {

QuantPath quant_best_path(ElementType format, int64_t m);
void quant_matmul_path_of_set(QuantPath path, float* C, int64_t ldc, const float* A, int64_t lda, int64_t m,
                              const QuantWeights& W, bool accumulate);
void quant_dequantize_rows_of_set(float* out, const QuantWeights& W, int64_t row0, int64_t rows);

}  // namespace gatedlm::kernels
