#include "kernels/weight_source.h"

#include <array>
#include <atomic>

#include "core/error.h"

namespace gatedlm::kernels {

namespace {

// Lock-free slots: products read them on every call, registration is rare.
std::array<std::atomic<WeightSource*>, kMaxWeightSources> g_sources{};
std::atomic<int> g_registered{0};

}  // namespace

void register_weight_source(WeightSource* source) {
  for (auto& slot : g_sources) {
    WeightSource* empty = nullptr;
    if (slot.compare_exchange_strong(empty, source)) {
      g_registered.fetch_add(1);
      return;
    }
  }
  fail("register_weight_source: more than ", kMaxWeightSources, " quantised models loaded at once");
}

void unregister_weight_source(WeightSource* source) {
  for (auto& slot : g_sources) {
    WeightSource* held = source;
    if (slot.compare_exchange_strong(held, nullptr)) {
      g_registered.fetch_sub(1);
      return;
    }
  }
}

bool weight_source_product(float* C, const float* A, const float* B, const MatmulShape& shape) {
  if (g_registered.load(std::memory_order_acquire) == 0) return false;
  for (auto& slot : g_sources)
    if (WeightSource* s = slot.load(std::memory_order_acquire); s && s->product(C, A, B, shape)) return true;
  return false;
}

bool weight_source_holds(const float* B) {
  if (g_registered.load(std::memory_order_acquire) == 0) return false;
  for (auto& slot : g_sources)
    if (WeightSource* s = slot.load(std::memory_order_acquire); s && s->holds(B)) return true;
  return false;
}

}  // namespace gatedlm::kernels
