#pragma once
// One generation from start to end on a decoder of its own (generate, bench): prefill the
// prompt, then decode until a stop rule ends it, timing both phases.
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "infer/decoder.h"
#include "infer/generation.h"

namespace gatedlm::infer {

struct GenerationTiming {
  int64_t prompt_tokens = 0, decode_tokens = 0;  // decode: forward passes after the prefill
  double prefill_s = 0, decode_s = 0;
  double prefill_tokens_per_s() const { return prefill_s > 0 ? prompt_tokens / prefill_s : 0; }
  double decode_tokens_per_s() const { return decode_s > 0 ? decode_tokens / decode_s : 0; }
};

// One step of a generation in `slot` of dec (reset it before the first): feeds gen's pending
// tokens (the prompt, then the last sampled token), samples the next one, adds the time to
// t and returns the newly final text ("" when none). Call while !gen.finished().
std::string step_generation(Decoder& dec, int64_t slot, Generation& gen, GenerationTiming& t);

// Runs gen in `slot` of dec (reset first); on_text gets each piece of final text.
GenerationTiming run_generation(Decoder& dec, int64_t slot, Generation& gen,
                                const std::function<void(const std::string&)>& on_text);

// The prompt as `generate` feeds it: BOS, then the text's ids.
std::vector<int32_t> prompt_ids(const io::Tokenizer& tokenizer, std::string_view text);

// The rule `generate` and `serve` follow: without a streaming window (window 0), prompt
// and completion share the model's context (max_seq_len); a prompt that fills it is
// refused naming `prompt_flag`, and the completion stops where the context is full.
// Returns the tokens that may be generated (at most max_tokens).
int64_t fit_to_context(int64_t prompt_tokens, int64_t max_tokens, int64_t window, int64_t max_seq_len,
                       const std::string& prompt_flag);

}  // namespace gatedlm::infer
