#pragma once
// A small, fully specified random generator (SplitMix64 + Box-Muller), so that a seed
// gives the same weights and data order on every platform and standard library.
#include <cmath>
#include <cstdint>
#include <string_view>

namespace gatedlm {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next_u64() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }  // [0, 1)
  uint64_t below(uint64_t n) { return next_u64() % n; }
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u1 = 0.0;
    while (u1 <= 0.0) u1 = uniform();
    double u2 = uniform();
    double r = std::sqrt(-2.0 * std::log(u1)), theta = 2.0 * M_PI * u2;
    spare_ = r * std::sin(theta);
    has_spare_ = true;
    return r * std::cos(theta);
  }
  uint64_t state() const { return state_; }

  // A seed derived from a base seed and a name (FNV-1a), for independent streams.
  static uint64_t derive(uint64_t seed, std::string_view name) {
    uint64_t h = 1469598103934665603ull ^ seed;
    for (char ch : name) h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
    return h;
  }

 private:
  uint64_t state_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

}  // namespace gatedlm
