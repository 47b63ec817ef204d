#pragma once
// Pointwise activations: the four gate activations and the SwiGLU of the FFN.
#include <cmath>
#include <cstdint>

namespace gatedlm::kernels {

enum class Activation { sigmoid, silu, ns_sigmoid, identity };

template <typename T>
inline T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

// act(x) and d act / dx for the gate activations; ns_sigmoid = 0.5 + 0.5*sigmoid.
template <typename T>
inline T activate(Activation a, T x) {
  switch (a) {
    case Activation::sigmoid: return sigmoid(x);
    case Activation::silu: return x * sigmoid(x);
    case Activation::ns_sigmoid: return T(0.5) + T(0.5) * sigmoid(x);
    case Activation::identity: return x;
  }
  return x;
}
template <typename T>
inline T activate_grad(Activation a, T x) {
  switch (a) {
    case Activation::sigmoid: { T s = sigmoid(x); return s * (T(1) - s); }
    case Activation::silu: { T s = sigmoid(x); return s * (T(1) + x * (T(1) - s)); }
    case Activation::ns_sigmoid: { T s = sigmoid(x); return T(0.5) * s * (T(1) - s); }
    case Activation::identity: return T(1);
  }
  return T(1);
}

// act'(x) from y = act(x), for the activations where it is a function of y (sigmoid:
// y (1 - y); NS-sigmoid: s (1 - s) / 2 with s = 2y - 1; identity: 1). SiLU is not one.
inline bool grad_from_output_known(Activation a) {
  return a != Activation::silu;
}
template <typename T>
inline T activate_grad_from_output(Activation a, T y) {
  switch (a) {
    case Activation::sigmoid: return y * (T(1) - y);
    case Activation::ns_sigmoid: { T s = T(2) * y - T(1); return T(0.5) * s * (T(1) - s); }
    case Activation::identity: return T(1);
    case Activation::silu: break;
  }
  return T(0);
}

// y = act(x), n elements.
template <typename T>
void activation_forward(T* y, const T* x, int64_t n, Activation a);
// dx += dy * act'(x).
template <typename T>
void activation_backward(T* dx, const T* dy, const T* x, int64_t n, Activation a);

// The same on one row, on the calling thread, for kernels that run their own parallel
// loop (the gate). activate_row: y = act(x); activate_grad_row: dx = dy * act'(x).
template <typename T>
void activate_row(T* y, const T* x, int64_t n, Activation a);
template <typename T>
void activate_grad_row(T* dx, const T* dy, const T* x, int64_t n, Activation a);

// SwiGLU over the fused gate|up projection: gu [rows, 2f] holds per row the gate_proj
// output g (first f columns) and the up_proj output u (last f). out [rows, f] = silu(g) * u.
template <typename T>
void swiglu_forward(T* out, const T* gu, int64_t rows, int64_t f);
// dgu [rows, 2f] = [dout * u * silu'(g) | dout * silu(g)] (overwritten).
template <typename T>
void swiglu_backward(T* dgu, const T* dout, const T* gu, int64_t rows, int64_t f);

}  // namespace gatedlm::kernels
