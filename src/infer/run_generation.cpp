#include "infer/run_generation.h"

#include <chrono>

namespace gatedlm::infer {

GenerationTiming run_generation(Decoder& dec, int64_t slot, Generation& gen,
                                const std::function<void(const std::string&)>& on_text) {
  using clock = std::chrono::steady_clock;
  GenerationTiming t;
  dec.reset(slot);
  const int64_t V = dec.config().vocab_size;
  bool first = true;
  while (!gen.finished()) {
    const auto start = clock::now();
    const std::span<const int32_t> feed = gen.pending();
    const float* logits = dec.step(std::vector<Chunk>{{slot, feed}});
    const std::string text = gen.accept(std::span<const float>(logits, V));
    const double s = std::chrono::duration<double>(clock::now() - start).count();
    if (first) {
      t.prompt_tokens = static_cast<int64_t>(feed.size());
      t.prefill_s = s;
    } else {
      t.decode_tokens += static_cast<int64_t>(feed.size());
      t.decode_s += s;
    }
    first = false;
    if (!text.empty() && on_text) on_text(text);
  }
  return t;
}

}  // namespace gatedlm::infer
