#pragma once
// One generation from start to end on a decoder of its own (generate, bench): prefill the
// prompt, then decode until a stop rule ends it, timing both phases.
#include <functional>
#include <string>

#include "infer/decoder.h"
#include "infer/generation.h"

namespace gatedlm::infer {

struct GenerationTiming {
  int64_t prompt_tokens = 0, decode_tokens = 0;  // decode: forward passes after the prefill
  double prefill_s = 0, decode_s = 0;
  double prefill_tokens_per_s() const { return prefill_s > 0 ? prompt_tokens / prefill_s : 0; }
  double decode_tokens_per_s() const { return decode_s > 0 ? decode_tokens / decode_s : 0; }
};

// Runs gen in `slot` of dec (reset first); on_text gets each piece of final text.
GenerationTiming run_generation(Decoder& dec, int64_t slot, Generation& gen,
                                const std::function<void(const std::string&)>& on_text);

}  // namespace gatedlm::infer
