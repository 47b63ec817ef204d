#pragma once
// One sequence being generated: its prompt, its sampler, its stop rules and the text it
// has produced. The caller (generate, serve, bench) feeds pending() to the decoder and
// hands the logits of the last fed token to accept(), which samples the next token and
// returns the text that may be shown now.
//
// Text is released only when it is final: never half a UTF-8 character, and never the
// start of a stop string that the next tokens might complete.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "infer/sampler.h"
#include "io/tokenizer.h"

namespace gatedlm::infer {

struct StopRules {
  int64_t max_tokens = 128;        // generated tokens at most (>= 1)
  std::vector<std::string> stop;   // stop strings (not included in the text)
  int32_t eos = -1;                // stop at this token (not included); < 0: none
};

enum class FinishReason { none, length, stop, eos };
std::string to_string(FinishReason r);  // "", "length", "stop", "eos"

class Generation {
 public:
  Generation(std::vector<int32_t> prompt, const SamplingParams& sampling, StopRules rules,
             const io::Tokenizer* tokenizer);

  // The tokens to run next: the whole prompt first, then the last sampled token.
  std::span<const int32_t> pending() const;
  // Takes the logits [vocab] of the last pending token: samples (with a tokenizer, only
  // among the ids it can decode), applies the stop rules and returns the newly final
  // text ("" when none, or when there is no tokenizer).
  std::string accept(std::span<const float> logits);

  bool finished() const { return reason_ != FinishReason::none; }
  FinishReason finish_reason() const { return reason_; }
  const std::vector<int32_t>& prompt() const { return prompt_; }
  const std::vector<int32_t>& generated() const { return generated_; }  // EOS excluded
  const std::string& text() const { return text_; }  // final text (stop string cut)
  int64_t emitted_bytes() const { return emitted_; }

 private:
  std::vector<int32_t> prompt_, generated_, history_;
  Sampler sampler_;
  StopRules rules_;
  const io::Tokenizer* tokenizer_;
  FinishReason reason_ = FinishReason::none;
  bool prompt_fed_ = false;
  std::string text_;
  int64_t emitted_ = 0;  // bytes of text_ already returned by accept()
};

// Bytes of s that form complete UTF-8 characters (an incomplete tail excluded).
size_t complete_utf8_prefix(std::string_view s);

}  // namespace gatedlm::infer
