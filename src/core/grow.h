#pragma once
// Scratch buffers reused from call to call: grow one to at least `size` elements, never
// shrink it (so a smaller call after a larger one allocates nothing).
#include <cstdint>
#include <vector>

namespace gatedlm {

template <typename T>
void grow(std::vector<T>& v, int64_t size) {
  if (static_cast<int64_t>(v.size()) < size) v.resize(static_cast<size_t>(size));
}

}  // namespace gatedlm
