#pragma once
// Helpers shared by the unit tests: random tensors and relative errors.
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/rng.h"

namespace gatedlm::testing {

template <typename T = double>
std::vector<T> random_vector(int64_t n, uint64_t seed, double scale = 1.0) {
  Rng rng(seed);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(rng.normal() * scale);
  return v;
}

// ||a - b|| / max(||b||, tiny)
template <typename A, typename B>
double rel_error(const A& a, const B& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    num += d * d;
    den += static_cast<double>(b[i]) * static_cast<double>(b[i]);
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-300);
}

// Central finite difference of f with respect to every element of x (x restored after).
template <typename F>
std::vector<double> numeric_grad(std::vector<double>& x, F&& f, double h = 1e-5) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double keep = x[i];
    x[i] = keep + h;
    const double up = f();
    x[i] = keep - h;
    const double down = f();
    x[i] = keep;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

}  // namespace gatedlm::testing
