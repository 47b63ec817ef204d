#pragma once
// Attention of single query tokens over a KV cache: the decode step of infer/. Each query
// row is one token, q [n_q, head_dim]; its keys and values lie in one or more spans of a
// cache (a streaming window keeps its sink tokens and its recent tokens apart), each span
// laid out as its KvLayout says. The softmax runs over every row of every span; the order
// of rows does not matter. Query head h reads kv head h / (n_q / n_kv), as in attention.h.
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include "kernels/quant_blocks.h"

namespace gatedlm::kernels {

// Where a span's row j of kv head h starts: base + j * row_stride + h * head_stride. Zeros
// stand for rows as they come out of the projections, [len, n_kv, head_dim] (row stride
// n_kv * head_dim, head stride head_dim); infer's KvCache keeps each head's rows together,
// [n_kv, capacity, head_dim] (row stride head_dim, head stride capacity * head_dim), so
// that a decode task reads one contiguous block instead of head_dim floats of every row.
struct KvLayout {
  int64_t row_stride = 0, head_stride = 0;
  // The offset of row j of kv head h.
  int64_t at(int64_t j, int64_t h, int64_t n_kv, int64_t head_dim) const {
    return j * (row_stride ? row_stride : n_kv * head_dim) + h * (head_stride ? head_stride : head_dim);
  }
};

// The element type of cached rows: T itself, binary16 bits (uint16_t, half_float.h) for a
// float query over a cache kept in F16 (infer's --kv-type f16: half the bytes to read per
// step), or Q8_0 blocks (BlockQ8_0, quant_blocks.h; --kv-type q8_0: 34 bytes per 32 values,
// head_dim a multiple of 32). The rows are converted to fp32 as they are loaded (a Q8_0
// value d * q is exact in fp32: an 11-bit d times an 8-bit q) and all arithmetic stays fp32.
// A span's pointers and layouts count in units of S: for Q8_0, blocks (a row of head_dim
// values is head_dim / 32 of them), and a Q8_0 span gives its strides (the zeros' default
// counts values).
template <typename T>
struct KvSpan {
  const T* k;
  const T* v;
  int64_t len;
  KvLayout k_layout{}, v_layout{};
};

template <typename T, typename S = T>
struct DecodeQuery {
  const T* q;                     // [n_q, head_dim]
  T* out;                         // [n_q, head_dim] softmax(scale q k^T) v
  const T* gate_score = nullptr;  // [n_q, head_dim]: with it, also gated_out = out * gate_score
  T* gated_out = nullptr;         //   (the G1 gate epilogue of attention_forward)
  std::vector<KvSpan<S>> spans;   // at least one row in all
  const T* sinks = nullptr;       // [n_q] learned sink logits (kernels/attention_sinks.h), or null
};

struct DecodeShape {
  int64_t n_q, n_kv, head_dim;
  double scale;  // usually 1/sqrt(head_dim)
  bool softpick = false;  // softpick's weights instead of softmax's (attention.h's AttentionShape)
};

// All queries at once. The float kernel (attention_decode_fast.cpp, compiled per kernel
// set), over float, F16 or Q8_0 rows, takes one task per (query, kv head) and reads each cached
// key and value row once for the group of query heads that share it; double takes the
// portable loop below. The bits of every output do not depend on the thread count.
// (S is named, or T: type_identity_t keeps it out of deduction, so that a vector of queries
// converts to the span.)
template <typename T, typename S = T>
void attention_decode(std::span<const DecodeQuery<T, std::type_identity_t<S>>> queries, const DecodeShape& s);
template <>
void attention_decode<float>(std::span<const DecodeQuery<float>> queries, const DecodeShape& s);
template <>
void attention_decode<float, uint16_t>(std::span<const DecodeQuery<float, uint16_t>> queries, const DecodeShape& s);
template <>
void attention_decode<float, BlockQ8_0>(std::span<const DecodeQuery<float, BlockQ8_0>> queries, const DecodeShape& s);
template <>
void attention_decode<double>(std::span<const DecodeQuery<double>> queries, const DecodeShape& s);

// The portable loop, one task per (query, query head), each re-reading its kv head's rows,
// compiled for the baseline target: the double path, and the float baseline that
// bench/attention_decode_speed.cpp measures the kernel sets against.
template <typename T, typename S = T>
void attention_decode_portable(std::span<const DecodeQuery<T, std::type_identity_t<S>>> queries, const DecodeShape& s);

// The number of cache rows each query sees; fails naming the problem when n_q is not a
// multiple of n_kv, a query has no rows, or Q8_0 rows are not whole blocks.
template <typename T, typename S = T>
std::vector<int64_t> decode_rows_checked(std::span<const DecodeQuery<T, S>> queries, const DecodeShape& s);

}  // namespace gatedlm::kernels
