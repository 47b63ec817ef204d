#pragma once
// The delta rule's chunk for training and prefill, and the shortest run of one sequence's
// tokens that takes the chunked form (shorter runs, decode above all, take the recurrence).
// The incremental path's bits depend on both: a prefix cache resumes only where a run of
// these chunks would have started (infer/prefix_reuse.h). Apart from gated_deltanet.h so
// that its private parts (gated_deltanet_parts.h) read them without including it.
#include <cstdint>

namespace gatedlm::model {

inline constexpr int64_t kDeltaRuleChunk = 64;
inline constexpr int64_t kDeltaRuleChunkedFrom = 16;

}  // namespace gatedlm::model
