#include "bench/generate_speed.h"

#include <algorithm>
#include <chrono>

#include "bench/median.h"
#include "core/error.h"
#include "core/rng.h"
#include "infer/decoder.h"

namespace gatedlm::bench {

namespace {

// The first index of the largest of z[0..n) (greedy decoding): the maximum by a loop the
// compiler vectorises, then its first position (std::max_element stays scalar).
int32_t argmax(const float* z, int64_t n) {
  float best = z[0];
#pragma omp simd reduction(max : best)
  for (int64_t i = 0; i < n; ++i) best = z[i] > best ? z[i] : best;
  return static_cast<int32_t>(std::find(z, z + n, best) - z);
}


}  // namespace

GenerateSpeed measure_generate_speed(model::Model<float>& model, int64_t batch, const GenerateSpeedOptions& o) {
  using clock = std::chrono::steady_clock;
  if (batch < 1 || o.prompt_tokens < 1 || o.new_tokens < 1 || o.reps < 1)
    fail("bench generate: batch, --prompt-tokens, --new-tokens and --reps must be at least 1");
  const int64_t V = model.config().vocab_size;
  infer::DecoderOptions options{batch, o.prompt_tokens + o.new_tokens};
  options.packed_weights = o.packed_weights;
  options.kv_type = o.kv_type;
  infer::Decoder dec(model, options);
  Rng rng(o.seed);
  std::vector<std::vector<int32_t>> prompts(batch, std::vector<int32_t>(o.prompt_tokens));
  for (auto& p : prompts)
    for (auto& t : p) t = static_cast<int32_t>(rng.below(V));
  GenerateSpeed r;
  r.batch = batch;
  for (int64_t rep = 0; rep <= o.reps; ++rep) {  // rep 0 warms up
    for (int64_t b = 0; b < batch; ++b) dec.reset(b);
    std::vector<infer::Chunk> chunks;
    for (int64_t b = 0; b < batch; ++b) chunks.push_back({b, prompts[b]});
    auto t0 = clock::now();
    const float* logits = dec.step(chunks);
    const double prefill = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    std::vector<int32_t> next(batch);
    t0 = clock::now();
    for (int64_t s = 0; s < o.new_tokens; ++s) {
#pragma omp parallel for schedule(static) if (batch > 1)
      for (int64_t b = 0; b < batch; ++b) next[b] = argmax(logits + b * V, V);
      for (int64_t b = 0; b < batch; ++b) chunks[b] = {b, std::span<const int32_t>(&next[b], 1)};
      logits = dec.step(chunks);
    }
    const double decode = std::chrono::duration<double, std::milli>(clock::now() - t0).count() / o.new_tokens;
    if (rep == 0) continue;
    r.prefill_ms_reps.push_back(prefill);
    r.decode_ms_reps.push_back(decode);
  }
  r.packed_weight_bytes = dec.packed_weights().bytes();
  for (int64_t tokens : {1024, 8192, 32768}) r.state_bytes_per_sequence.push_back({tokens, dec.state_bytes_per_sequence(tokens)});
  int64_t state_read = 0;  // step s attends P + s + 1 rows (capped where a layer keeps a window)
  for (int64_t s = 0; s < o.new_tokens; ++s) state_read += dec.state_bytes_per_sequence(o.prompt_tokens + s + 1);
  r.decode_state_bytes_per_step = state_read / o.new_tokens;
  r.prefill_ms = median(r.prefill_ms_reps);
  r.decode_ms_per_step = median(r.decode_ms_reps);
  r.prefill_tokens_per_s = batch * o.prompt_tokens / (r.prefill_ms / 1000.0);
  r.decode_tokens_per_s = batch / (r.decode_ms_per_step / 1000.0);
  return r;
}

}  // namespace gatedlm::bench
