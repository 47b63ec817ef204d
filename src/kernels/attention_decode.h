#pragma once
// Attention of single query tokens over a KV cache: the decode step of infer/. Each query
// row is one token, q [n_q, head_dim]; its keys and values are rows [n_kv, head_dim]
// (row stride n_kv * head_dim) in one or more spans of a cache (a streaming window keeps
// its sink tokens and its recent tokens apart). The softmax runs over every row of every
// span; the order of rows does not matter. Query head h reads kv head h / (n_q / n_kv),
// as in attention.h.
#include <cstdint>
#include <span>
#include <vector>

namespace gatedlm::kernels {

template <typename T>
struct KvSpan {
  const T* k;   // [len, n_kv, head_dim]
  const T* v;   // [len, n_kv, head_dim]
  int64_t len;
};

template <typename T>
struct DecodeQuery {
  const T* q;                     // [n_q, head_dim]
  T* out;                         // [n_q, head_dim] softmax(scale q k^T) v
  const T* gate_score = nullptr;  // [n_q, head_dim]: with it, also gated_out = out * gate_score
  T* gated_out = nullptr;         //   (the G1 gate epilogue of attention_forward)
  std::vector<KvSpan<T>> spans;   // at least one row in all
};

struct DecodeShape {
  int64_t n_q, n_kv, head_dim;
  double scale;  // usually 1/sqrt(head_dim)
};

// All queries at once, one task per (query, head).
template <typename T>
void attention_decode(std::span<const DecodeQuery<T>> queries, const DecodeShape& s);

}  // namespace gatedlm::kernels
