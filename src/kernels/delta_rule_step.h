#pragma once
// One token of the gated delta rule's recurrence (delta_rule.h) on one head's state: the
// decode step of a Gated DeltaNet layer, and the recurrence's forward. Compiled once per
// kernel set (delta_rule_step.cpp), so that its loops over a state row take the set's widest
// vectors; this forwards to the active set's (dispatch.cpp).
#include <cstdint>

namespace gatedlm::kernels {

// S [dk, dv] = e^g S; u = beta (v - S^T k); S += k u^T; o = S^T q (o null: not wanted).
// u [dv] is scratch. No argument may overlap another.
template <typename T>
void delta_rule_step(T* S, T* o, const T* q, const T* k, const T* v, T g, T beta, int64_t dk, int64_t dv, T* u);

}  // namespace gatedlm::kernels
