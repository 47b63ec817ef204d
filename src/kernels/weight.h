#pragma once
// A weight matrix as the products meet it: its values and, when the model holds it in
// another element type (a quantised model: model/quantized_weights.h), its rows in that
// type. The products below dispatch on the weight itself: a stored weight is multiplied
// on its blocks (kernels::quant_matmul), any other on its values (kernels::matmul). So
// any number of models, in any mix of types, live in one process, and nothing is looked
// up by address at product time.
//
// Who stores a model's weights (a WeightStore) fills in the weights' stored rows once,
// when it is attached to the model (Model<float>::attach_weight_store); a weight then
// remembers its store, so that a view further into the same tensors (a later expert of
// an MoE layer, one head's block of a switch-head expert) is found in it too (at()).
#include <cstdint>
#include <type_traits>

#include "kernels/element_types.h"
#include "kernels/matmul.h"
#include "kernels/quant_matmul.h"

namespace gatedlm::kernels {

// Rows [row0, row0 + the product's N) of a matrix of blocks: a weight's stored form.
struct StoredRows {
  QuantWeights matrix{ElementType::f32, nullptr, 0, 0, 0};  // data null: not stored
  int64_t row0 = 0;
};

class WeightStore;

template <typename T>
struct Weight {
  const T* values = nullptr;  // row-major; for a stored weight, zeros where released
  StoredRows stored;          // stored.matrix.data null: the values are all there is
  const WeightStore* store = nullptr;

  Weight() = default;
  Weight(const T* v) : values(v) {}  // NOLINT: plain values are a weight of their own type
  explicit operator bool() const { return values != nullptr; }
  bool is_stored() const { return stored.matrix.data != nullptr; }
  // The element type products read: the stored rows' type, else F32 (F64 has no row in the
  // element table: double models exist only for the gradient checks).
  ElementType type() const { return is_stored() ? stored.matrix.format : ElementType::f32; }
  // The weight whose values start `elements` further on, in the same store (a later
  // expert, a head's rows).
  Weight at(int64_t elements) const;
};

// Who holds a model's weights in another element type. weight() answers for the fp32
// element `values` of the model's buffer: a weight with stored rows when the tensor there
// is stored (values must start one of its rows), else plain values (both remember the
// store). plain_values() says how many plain values follow `values` before the next stored
// tensor (a product over consecutive tensors of other types, e.g. a fused q|k|v whose v is
// Q6_K and q|k Q4_K in a Q4_K_M model, multiplies each run of one type by itself).
class WeightStore {
 public:
  virtual ~WeightStore() = default;
  virtual Weight<float> weight(const float* values) const = 0;
  virtual int64_t plain_values(const float* values) const = 0;
};

template <typename T>
Weight<T> Weight<T>::at(int64_t elements) const {
  if constexpr (std::is_same_v<T, float>)
    if (store) return store->weight(values + elements);
  return Weight<T>(values + elements);
}

// The products of matmul.h with a weight as B. A stored B must be read as whole rows of
// its matrix, transposed (C = A B^T with K = its width, as every forward product of the
// model does); any other view of it is refused, naming the shape. Rows past the end of its
// matrix continue in the store's next tensors, each run of rows multiplied in its own type.
template <typename T>
void matmul(T* C, const T* A, const Weight<T>& B, MatmulShape shape);
// Item i multiplies B.at(i * strides.b) (a stored B: item by item).
template <typename T>
void batched_matmul(T* C, const T* A, const Weight<T>& B, MatmulShape shape, BatchStrides strides);
// y[n, out] = x[n, in] W^T for W [out, in].
template <typename T>
void linear_forward(T* y, const T* x, const Weight<T>& W, int64_t n, int64_t in, int64_t out);

}  // namespace gatedlm::kernels
