#pragma once
// Size limits derived from the machine's memory, checked before allocating, so that a
// huge config value or input is refused with a message instead of a std::bad_alloc or the
// kernel's OOM killer.
#include <cstdint>
#include <string>

namespace gatedlm {

// Physical memory of the machine in bytes (sysconf), or of the cgroup when it is lower.
uint64_t physical_memory_bytes();

// Throws naming `what` when `bytes` is more than the machine's physical memory; `hint`
// says what to lower (e.g. "lower --batch-size or --seq-len").
void require_memory(const std::string& what, uint64_t bytes, const std::string& hint);

// a * b, or UINT64_MAX when it overflows (for size estimates compared against limits).
uint64_t saturating_mul(uint64_t a, uint64_t b);
uint64_t saturating_add(uint64_t a, uint64_t b);

}  // namespace gatedlm
