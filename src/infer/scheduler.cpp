#include "infer/scheduler.h"

#include "core/error.h"

namespace gatedlm::infer {

bool Request::wait(std::string& text, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu);
  cv.wait_for(lock, timeout, [&] { return done_ || !text_.empty(); });
  text += text_;
  text_.clear();
  return done_;
}

Scheduler::Scheduler(model::Model<float>& model, const SchedulerOptions& o)
    : decoder_(model, {.slots = o.max_batch,
                       .capacity = o.context > 0 ? o.context : model.config().max_seq_len,
                       .packed_weights = o.packed_weights,
                       .kv_type = o.kv_type}),
      fed_(o.max_batch, 0), piece_end_(o.max_batch, 0),
      context_(decoder_.capacity()), max_queue_(o.max_queue), slots_(o.max_batch) {
  if (o.max_queue < 0) fail("--max-queue must not be negative");
  if (o.prefix_cache_bytes < 0) fail("--prefix-cache-bytes must not be negative, got ", o.prefix_cache_bytes);
  const std::string refusal = decoder_.prefix_reuse_refusal();
  if (o.prefix_cache_bytes == 0) {
    prefix_status_ = "off";
  } else if (!refusal.empty()) {
    prefix_status_ = "off (" + refusal + ")";
  } else {
    prefix_ = std::make_unique<PrefixReuse>(decoder_, o.prefix_cache_bytes);
    prefix_status_ = std::to_string(o.prefix_cache_bytes) + " bytes";
  }
  worker_ = std::thread([this] { run(); });
}

Scheduler::~Scheduler() { drain(); }

std::shared_ptr<Request> Scheduler::submit(std::vector<int32_t> prompt, const SamplingParams& sampling,
                                           const StopRules& rules, const io::Tokenizer* tokenizer) {
  if (static_cast<int64_t>(prompt.size()) + rules.max_tokens > context_)
    fail("the prompt (", prompt.size(), " tokens) plus max_tokens (", rules.max_tokens, ") exceed the context of ",
         context_, " tokens");
  auto r = std::make_shared<Request>(std::move(prompt), sampling, rules, tokenizer);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || static_cast<int64_t>(queue_.size()) >= max_queue_) return nullptr;
    queue_.push_back(r);
  }
  cv_.notify_all();
  return r;
}

int64_t Scheduler::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(queue_.size());
}

void Scheduler::drain() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void Scheduler::finish(int64_t slot, const std::string& error) {
  std::shared_ptr<Request> r = std::move(slots_[slot]);
  slots_[slot].reset();
  --active_count_;
  {
    std::lock_guard<std::mutex> lock(r->mu);
    r->done_ = true;
    r->error_ = error;
  }
  r->cv.notify_all();
}

// The slot's new request starts from the longest cached prefix of its prompt.
void Scheduler::start(int64_t slot) {
  Request& r = *slots_[slot];
  if (prefix_) {
    fed_[slot] = prefix_->restore(slot, r.gen.prompt());
  } else {
    decoder_.reset(slot);
    fed_[slot] = 0;
  }
  r.cached_tokens_ = fed_[slot];
  reused_tokens_ += fed_[slot];
}

PrefixCacheStats Scheduler::prefix_cache_stats() const {
  if (!prefix_) return {};
  return {prefix_->cache().budget(), cache_bytes_, cache_entries_, reused_tokens_};
}

// The slot's tokens for this step: the prompt's next piece (up to where the prefix cache
// takes a snapshot), then one token at a time.
std::span<const int32_t> Scheduler::next_chunk(int64_t slot) {
  const std::vector<int32_t>& prompt = slots_[slot]->gen.prompt();
  const int64_t n = static_cast<int64_t>(prompt.size()), from = fed_[slot];
  if (from >= n) return slots_[slot]->gen.pending();
  piece_end_[slot] = prefix_ ? prefix_->piece_end(from, n) : n;
  return std::span<const int32_t>(prompt).subspan(from, piece_end_[slot] - from);
}

void Scheduler::run() {
  const int64_t V = decoder_.config().vocab_size;
  std::vector<int64_t> order;
  for (;;) {
    std::vector<int64_t> admitted;
    {  // Admit waiting requests into free slots; sleep when there is nothing to do.
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty() || active_count_ > 0; });
      for (int64_t s = 0; s < static_cast<int64_t>(slots_.size()) && !queue_.empty(); ++s)
        if (!slots_[s]) {
          slots_[s] = std::move(queue_.front());
          queue_.pop_front();
          ++active_count_;
          admitted.push_back(s);
        }
      if (stopping_ && queue_.empty() && active_count_ == 0) return;
    }
    for (int64_t s : admitted) start(s);  // outside the lock: a restored prefix is copied
    order.clear();
    std::vector<Chunk> chunks;
    for (int64_t s = 0; s < static_cast<int64_t>(slots_.size()); ++s) {
      if (!slots_[s]) continue;
      if (slots_[s]->cancelled) {
        finish(s, "cancelled");
        continue;
      }
      chunks.push_back({s, next_chunk(s)});
      order.push_back(s);
    }
    if (chunks.empty()) continue;
    const float* logits = nullptr;
    try {
      logits = decoder_.step(chunks);
    } catch (const Error& e) {
      for (int64_t s : order) finish(s, e.what());
      continue;
    }
    for (size_t i = 0; i < order.size(); ++i) {
      Request& r = *slots_[order[i]];
      const int64_t n = static_cast<int64_t>(r.gen.prompt().size()), s = order[i];
      if (fed_[s] < n) {  // a piece of the prompt: save the state where the cache wants it
        fed_[s] = piece_end_[s];
        if (prefix_) {
          prefix_->fed(s, r.gen.prompt(), fed_[s]);
          cache_bytes_ = prefix_->cache().bytes();
          cache_entries_ = prefix_->cache().entries();
        }
        if (fed_[s] < n) continue;  // no token to sample yet
      }
      std::string text;
      try {
        text = r.gen.accept(std::span<const float>(logits + i * V, V));
      } catch (const Error& e) {  // this request's failure (say, an id its tokenizer cannot decode), not the server's
        finish(order[i], e.what());
        continue;
      }
      if (!text.empty()) {
        std::lock_guard<std::mutex> lock(r.mu);
        r.text_ += text;
      }
      if (r.gen.finished()) {
        finish(order[i]);
      } else if (!text.empty()) {
        r.cv.notify_all();
      }
    }
  }
}

}  // namespace gatedlm::infer
