#include "infer/run_generation.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"

namespace gatedlm::infer {

std::string step_generation(Decoder& dec, int64_t slot, Generation& gen, GenerationTiming& t) {
  using clock = std::chrono::steady_clock;
  const int64_t V = dec.config().vocab_size;
  const bool first = t.prompt_tokens == 0;  // the prompt (at least BOS) is always the first feed
  const auto start = clock::now();
  const std::span<const int32_t> feed = gen.pending();
  const int64_t fed = static_cast<int64_t>(feed.size());
  const float* logits = dec.step(std::vector<Chunk>{{slot, feed}});
  std::string text = gen.accept(std::span<const float>(logits, V));
  const double s = std::chrono::duration<double>(clock::now() - start).count();
  if (first) {
    t.prompt_tokens = fed;
    t.prefill_s = s;
  } else {
    t.decode_tokens += fed;
    t.decode_s += s;
  }
  return text;
}

GenerationTiming run_generation(Decoder& dec, int64_t slot, Generation& gen,
                                const std::function<void(const std::string&)>& on_text) {
  GenerationTiming t;
  dec.reset(slot);
  while (!gen.finished()) {
    const std::string text = step_generation(dec, slot, gen, t);
    if (!text.empty() && on_text) on_text(text);
  }
  return t;
}

std::vector<int32_t> prompt_ids(const io::Tokenizer& tokenizer, std::string_view text) {
  std::vector<int32_t> prompt{tokenizer.bos_id()};
  for (int32_t id : tokenizer.encode(text)) prompt.push_back(id);
  return prompt;
}

int64_t fit_to_context(int64_t prompt_tokens, int64_t max_tokens, int64_t window, int64_t max_seq_len,
                       const std::string& prompt_flag) {
  if (window > 0) return max_tokens;  // the cache keeps the last `window` tokens: no end
  const int64_t room = max_seq_len - prompt_tokens;
  if (room < 1)
    fail(prompt_flag, ": the prompt's ", prompt_tokens, " tokens (with BOS) leave no room in the model's context of ",
         max_seq_len, " tokens (max_seq_len); shorten it, or give --window W to stream past the context");
  return std::min(max_tokens, room);
}

}  // namespace gatedlm::infer
