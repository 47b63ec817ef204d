#include "infer/generation.h"

#include <algorithm>

#include "core/error.h"

namespace gatedlm::infer {

std::string to_string(FinishReason r) {
  switch (r) {
    case FinishReason::length: return "length";
    case FinishReason::stop: return "stop";
    case FinishReason::eos: return "eos";
    case FinishReason::none: break;
  }
  return "";
}

size_t complete_utf8_prefix(std::string_view s) {
  // Walk back over at most 3 continuation bytes to the last lead byte; keep it only when
  // its character is complete.
  size_t n = s.size(), i = n;
  int back = 0;
  while (i > 0 && back < 4 && (static_cast<unsigned char>(s[i - 1]) & 0xC0) == 0x80) --i, ++back;
  if (i == 0) return n;  // only continuation bytes: no lead to wait on
  const unsigned char lead = static_cast<unsigned char>(s[i - 1]);
  const size_t need = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 1;
  return (n - (i - 1)) >= need ? n : i - 1;
}

Generation::Generation(std::vector<int32_t> prompt, const SamplingParams& sampling, StopRules rules,
                       const io::Tokenizer* tokenizer)
    : prompt_(std::move(prompt)), history_(prompt_), sampler_(sampling), rules_(std::move(rules)),
      tokenizer_(tokenizer) {
  if (prompt_.empty()) fail("the prompt is empty (no tokens)");
  if (rules_.max_tokens < 1) fail("--max-tokens must be at least 1, got ", rules_.max_tokens);
  for (const std::string& s : rules_.stop)
    if (s.empty()) fail("--stop: a stop string may not be empty");
}

std::span<const int32_t> Generation::pending() const {
  if (!prompt_fed_) return prompt_;
  return std::span<const int32_t>(generated_).last(1);
}

std::string Generation::accept(std::span<const float> logits) {
  if (finished()) fail("generation: accept after the end");
  prompt_fed_ = true;
  // Ids past the tokenizer's vocabulary (a model's padded embedding rows, or a model
  // paired with a smaller tokenizer) have no text: they are never sampled.
  if (tokenizer_ && tokenizer_->vocab_size() < static_cast<int64_t>(logits.size()))
    logits = logits.first(static_cast<size_t>(tokenizer_->vocab_size()));
  const int32_t next = sampler_.sample(logits, history_);
  history_.push_back(next);
  if (next == rules_.eos && rules_.eos >= 0) {
    reason_ = FinishReason::eos;
  } else {
    generated_.push_back(next);
    if (static_cast<int64_t>(generated_.size()) >= rules_.max_tokens) reason_ = FinishReason::length;
  }
  if (!tokenizer_) return "";
  std::string full = tokenizer_->decode(generated_);
  // The earliest stop string ends the text there.
  size_t cut = std::string::npos;
  for (const std::string& s : rules_.stop) cut = std::min(cut, full.find(s));
  if (cut != std::string::npos) {
    full.resize(cut);
    reason_ = FinishReason::stop;
  }
  size_t final_len = full.size();
  if (!finished()) {
    // Hold back the longest tail that starts a stop string, and an incomplete character.
    for (const std::string& s : rules_.stop)
      for (size_t k = std::min(s.size() - 1, full.size()); k > 0; --k)
        if (full.compare(full.size() - k, k, s, 0, k) == 0) {
          final_len = std::min(final_len, full.size() - k);
          break;
        }
    final_len = std::min(final_len, complete_utf8_prefix(std::string_view(full).substr(0, final_len)));
  }
  text_ = full.substr(0, final_len);
  // Text already returned never changes (decode of a longer id list extends it).
  const int64_t from = std::min<int64_t>(emitted_, static_cast<int64_t>(text_.size()));
  std::string out = text_.substr(from);
  emitted_ = std::max<int64_t>(emitted_, static_cast<int64_t>(text_.size()));
  return out;
}

}  // namespace gatedlm::infer
