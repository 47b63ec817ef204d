#pragma once
// The gated delta rule of Gated DeltaNet (Yang, Kautz & Hatamizadeh, "Gated Delta Networks",
// ICLR 2025; the linear-attention layers of Qwen3-Next and Qwen3.5). Per sequence and value
// head a state S [d_k, d_v] is carried over the tokens t:
//   S = exp(g_t) S;   S += k_t (beta_t (v_t - S^T k_t))^T;   o_t = S^T q_t
// q_t and k_t are already L2-normalised per head and q_t scaled by the caller; g_t <= 0 is the
// log decay, beta_t in (0, 1) the write strength. Key heads are already repeated to value
// heads by the caller, so every head here has its own q, k, v, g and beta.
//
// Layouts (row-major, token-major like attention.h): q, k [batch, seq, heads, d_k];
// v, out [batch, seq, heads, d_v]; g, beta [batch, seq, heads]; states [batch, heads, d_k, d_v].
// An initial state (null: zeros) lets prefill hand over to decode and chunked training carry
// the state between windows; the final state (null: not written) is the state after the last
// token.
//
// Two forms of the same function:
// - the recurrence: token by token, O(seq d_k d_v) per head with no matrix products. The
//   reference, and the one-step decode kernel. Its backward is written by hand; it keeps the
//   state every kCheckpointTokens tokens and recomputes the states in between, so its memory is
//   O((seq / 64 + 64) d_k d_v) per head instead of one state per token.
// - the chunked (WY / UT-transform) form, as transformers' torch_chunk_gated_delta_rule: within
//   a chunk of C tokens with cumulative log decay G_t = g_1 + ... + g_t (from the chunk start)
//   and state S0 at its start, the writes U [C, d_v] solve the unit lower-triangular system
//     (I + M) U = diag(beta) V - diag(beta e^G) K S0,  M_tj = beta_t e^(G_t - G_j) k_t.k_j (j < t)
//   and then
//     O = diag(e^G) Q S0 + ((Q K^T) o D) U,       D_tj = e^(G_t - G_j) (j <= t), 0 above
//     S = e^(G_C) S0 + (diag(e^(G_C - G)) K)^T U.
//   Every exponent is <= 0, so nothing overflows. (I + M)^-1 is built by forward substitution
//   (C^3 / 6 per chunk); everything else is a matrix product through matmul.h, batched over the
//   heads (oneDNN for float), so most of the work runs on the matrix units. A last chunk
//   shorter than C is handled as a chunk of its own length (no padding). Its backward
//   differentiates these formulas chunk by chunk from the last (dU, then dR = (I + M)^-T dU,
//   dM = -dR U^T below the diagonal, dG summed back into dg), again mostly products.
// Why both: the recurrence is simple enough to trust and check by finite differences; the
// chunked form is what training and prefill run, tested against it (test_delta_rule.cpp).
// Threads go to the sequences of a batch when it has several (each sequence's chunks then run
// on one thread), else to the heads (OpenMP by hand, and the products' tiles), so a layer
// should pass all its sequences and heads in one call. The bits do not depend on the thread count.
#include <cstdint>
#include <span>

namespace gatedlm::kernels {

struct DeltaRuleShape {
  int64_t batch, seq, heads, key_dim, value_dim;
};

// Throws gatedlm::Error naming the field when a size is negative or a head width below 1.
void check_delta_rule_shape(const DeltaRuleShape& s);

// States are saved every this many tokens by the recurrence's backward.
inline constexpr int64_t kCheckpointTokens = 64;

// The inputs, in the layouts above; initial_state null: zeros.
template <typename T>
struct DeltaRuleInputs {
  const T *q, *k, *v, *g, *beta, *initial_state;
};

// out [batch, seq, heads, d_v]; final_state [batch, heads, d_k, d_v] or null. final_state
// may be in.initial_state itself (the state updated in place: each head reads its slice
// before it writes it), as a decode step's carried state is.
template <typename T>
void delta_rule_recurrent_forward(T* out, T* final_state, const DeltaRuleInputs<T>& in, const DeltaRuleShape& s);

// One sequence's share of a delta_rule_recurrent_runs call: rows [first, first + count) of the
// inputs, and its carried state [heads, d_k, d_v], which the call updates in place.
template <typename T>
struct DeltaRuleRun {
  int64_t first, count;
  T* state;
};

// The recurrence of several sequences at once, as a decode step of a batch holds them: in and
// out laid out as one sequence of s.seq rows (s.batch must be 1), each run reading and writing
// its own rows from and into its own state. Every (run, head) pair goes to the threads in one
// loop (a call of delta_rule_recurrent_forward per sequence was a parallel region per sequence
// and layer: 72 a step of a Qwen3.5-shaped 150M hybrid at batch 8). Each run's values are those
// delta_rule_recurrent_forward gives it alone, bit for bit, whatever the thread count. Throws
// naming the run whose rows fall outside s.seq or whose state is null.
template <typename T>
void delta_rule_recurrent_runs(T* out, std::span<const DeltaRuleRun<T>> runs, const DeltaRuleInputs<T>& in,
                               const DeltaRuleShape& s);

// The gradients with respect to the inputs, in their layouts. They are written (overwritten),
// not accumulated: the caller sums dq and dk over the value heads that share a key head.
// d_initial_state null: not wanted (otherwise the gradient with respect to initial_state, or
// to the zero state when that is null).
template <typename T>
struct DeltaRuleGrads {
  T *dq, *dk, *dv, *dg, *dbeta, *d_initial_state;
};

// Given d_out [batch, seq, heads, d_v] and d_final_state [batch, heads, d_k, d_v] (null: zero).
template <typename T>
void delta_rule_recurrent_backward(const DeltaRuleGrads<T>& grads, const T* d_out, const T* d_final_state,
                                   const DeltaRuleInputs<T>& in, const DeltaRuleShape& s);

// The chunked form (header comment), chunk_size tokens per chunk (32-64 is the sweet spot:
// products large enough for oneDNN, the C^3 solve still small). Same arguments and result as
// delta_rule_recurrent_forward up to rounding. Throws on chunk_size < 1. chunk_states (null:
// not kept) receives the state at each chunk's start, [batch, chunks, heads, d_k, d_v]
// (delta_rule_chunk_states_size elements), for the backward.
template <typename T>
void delta_rule_chunked_forward(T* out, T* final_state, const DeltaRuleInputs<T>& in, const DeltaRuleShape& s,
                                int64_t chunk_size = 64, T* chunk_states = nullptr);

// Elements of the forward's chunk_states for this shape and chunk size.
int64_t delta_rule_chunk_states_size(const DeltaRuleShape& s, int64_t chunk_size);

// The backward of the chunked form: the same gradients as delta_rule_recurrent_backward up to
// rounding, with the work in matrix products. It needs the state at each chunk start: the
// forward's chunk_states (same inputs and chunk size), or null to run the chunks forward once
// more for them; then it walks the chunks back recomputing each one's system, writes and scores.
template <typename T>
void delta_rule_chunked_backward(const DeltaRuleGrads<T>& grads, const T* d_out, const T* d_final_state,
                                 const DeltaRuleInputs<T>& in, const DeltaRuleShape& s, int64_t chunk_size = 64,
                                 const T* chunk_states = nullptr);

}  // namespace gatedlm::kernels
