#pragma once
// Continuous batching: requests wait in a bounded queue, take a free slot of one shared
// Decoder at the next step, and decode together (a new request's prompt runs in the
// same forward as the others' decode tokens). One worker thread owns the model; other
// threads submit requests and read their text as it comes. Each request has its own
// seeded sampler, so its text does not depend on what else is running. With a prefix cache
// (prefix_reuse.h) a request starts from the longest cached prefix of its prompt and runs
// the rest, in pieces where snapshots are taken; its tokens are those it gets without.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kernels/element_types.h"
#include "infer/decoder.h"
#include "infer/generation.h"
#include "infer/prefix_reuse.h"

namespace gatedlm::infer {

// One request's view for the thread that serves it.
class Request {
 public:
  Request(std::vector<int32_t> prompt, const SamplingParams& sampling, const StopRules& rules,
          const io::Tokenizer* tokenizer)
      : gen(std::move(prompt), sampling, rules, tokenizer) {}

  // Waits up to `timeout` for text or the end; moves the text so far into `text`.
  // Returns true once the request is over (all its text taken).
  bool wait(std::string& text, std::chrono::milliseconds timeout);
  // The client went away: the scheduler frees the slot at its next step.
  void cancel() { cancelled = true; }

  // Final state, valid once wait() returned true.
  FinishReason finish_reason() const { return gen.finish_reason(); }
  int64_t prompt_tokens() const { return static_cast<int64_t>(gen.prompt().size()); }
  int64_t completion_tokens() const { return static_cast<int64_t>(gen.generated().size()); }
  // Prompt tokens restored from the prefix cache instead of computed.
  int64_t cached_tokens() const { return cached_tokens_; }
  const std::string& error() const { return error_; }

 private:
  friend class Scheduler;
  Generation gen;  // touched by the worker only, until done
  std::atomic<bool> cancelled{false};
  std::mutex mu;
  std::condition_variable cv;
  std::string text_;  // produced, not yet taken
  bool done_ = false;
  std::string error_;
  int64_t cached_tokens_ = 0;  // set by the worker when the request takes a slot
};

// What the prefix cache holds, as last seen by the worker (all zero without a cache).
struct PrefixCacheStats {
  int64_t budget = 0, bytes = 0, entries = 0;
  int64_t reused_tokens = 0;  // prompt tokens restored instead of computed, since the start
};

struct SchedulerOptions {
  int64_t max_batch = 8;   // sequences decoding at once (decoder slots)
  int64_t max_queue = 64;  // requests waiting for a slot
  int64_t context = 0;     // tokens per sequence (prompt + generated); 0 = the model's max_seq_len
  bool packed_weights = true;  // DecoderOptions::packed_weights
  int64_t prefix_cache_bytes = 0;  // the prefix cache's budget (prefix_reuse.h); 0: none
  kernels::ElementType kv_type = kernels::ElementType::f32;  // DecoderOptions::kv_type
};

class Scheduler {
 public:
  Scheduler(model::Model<float>& model, const SchedulerOptions& options);
  ~Scheduler();  // finishes the requests in flight, then stops

  int64_t context() const { return context_; }
  // Queues a request; null when the queue is full (the caller answers 503).
  std::shared_ptr<Request> submit(std::vector<int32_t> prompt, const SamplingParams& sampling, const StopRules& rules,
                                  const io::Tokenizer* tokenizer);
  // Lets the requests in flight and in the queue finish, then stops the worker.
  void drain();
  int64_t active() const { return active_count_; }
  int64_t queued() const;
  // "off", or the prefix cache's budget, or why the model cannot have one.
  std::string prefix_cache_status() const { return prefix_status_; }
  PrefixCacheStats prefix_cache_stats() const;

 private:
  void run();
  void finish(int64_t slot, const std::string& error = "");
  void start(int64_t slot);
  std::span<const int32_t> next_chunk(int64_t slot);

  Decoder decoder_;
  std::unique_ptr<PrefixReuse> prefix_;  // null: no prefix cache
  std::string prefix_status_;
  std::vector<int64_t> fed_, piece_end_;  // [slots] prompt tokens in the decoder; end of the piece in this step
  std::atomic<int64_t> cache_bytes_{0}, cache_entries_{0}, reused_tokens_{0};  // written by the worker
  int64_t context_, max_queue_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Request>> queue_;
  std::vector<std::shared_ptr<Request>> slots_;  // worker only
  std::atomic<int64_t> active_count_{0};
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace gatedlm::infer
