#pragma once
// Generation speed in this process (`gatedlm bench generate`, bench/compare_generate.py):
// `batch` random prompts of prompt_tokens prefilled in one step, then new_tokens decode
// steps of `batch` tokens each (greedy, the argmax of each row: sampling is not timed).
//   prefill_tokens_per_s = batch * prompt_tokens / prefill time (median of reps)
//   decode_tokens_per_s  = batch * new_tokens / decode time (aggregate over the batch)
#include <cstdint>
#include <vector>

#include "kernels/element_types.h"
#include "model/model.h"

namespace gatedlm::bench {

struct GenerateSpeedOptions {
  int64_t prompt_tokens = 128, new_tokens = 64, reps = 3;
  uint64_t seed = 1;
  bool packed_weights = true;  // infer::DecoderOptions::packed_weights
  kernels::ElementType kv_type = kernels::ElementType::f32;  // infer::DecoderOptions::kv_type
};

struct GenerateSpeed {
  int64_t batch = 0;
  double prefill_tokens_per_s = 0, decode_tokens_per_s = 0;
  double prefill_ms = 0, decode_ms_per_step = 0;  // medians over reps
  std::vector<double> prefill_ms_reps, decode_ms_reps;  // per rep: prefill, and the mean decode step
  int64_t packed_weight_bytes = 0;  // the decoder's packed copies of the weights (0: none made)
  // Decode state per sequence (KV cache rows of the softmax layers + the linear layers'
  // recurrent state) at 1k, 8k and 32k tokens.
  std::vector<std::pair<int64_t, int64_t>> state_bytes_per_sequence;
  // The decode state one sequence's step reads, averaged over the timed steps (step s of a
  // prompt of P tokens attends P + s + 1 rows).
  int64_t decode_state_bytes_per_step = 0;
};

GenerateSpeed measure_generate_speed(model::Model<float>& model, int64_t batch, const GenerateSpeedOptions& o);

}  // namespace gatedlm::bench
