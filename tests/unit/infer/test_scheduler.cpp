// infer/scheduler.h, continuous batching: waiting requests take free decoder slots in the
// order they came, a full queue refuses, a request that ends (its length, or cancelled)
// frees its slot for the next one, and drain() lets everything queued finish.
//
// Which request holds a slot is seen from its text: with the byte tokenizer a decoding
// request shows text after a few tokens, a waiting one none. A "holding" request asks for
// nearly the whole 65536-token context, which takes this model well over a minute, so it
// keeps its slot until the test cancels it; every wait is for an event, with a generous
// deadline.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "infer/scheduler.h"
#include "io/tokenizer.h"
#include "model/init.h"
#include "test_files.h"

namespace gatedlm::infer {
namespace {

using namespace std::chrono_literals;
using gatedlm::testing::contains;
using gatedlm::testing::error_of;

constexpr int64_t kContext = 65536;
constexpr auto kDeadline = 120s;

model::Model<float> scheduler_model() {
  model::ModelConfig c;
  c.vocab_size = 258, c.d_model = 64, c.n_layers = 2, c.n_heads = 2, c.n_kv_heads = 1, c.head_dim = 16;
  c.ffn_hidden = 256, c.max_seq_len = kContext;
  model::Model<float> m(c);
  std::vector<float> p(m.layout().total());
  model::init_params(p, m.layout(), c, 11);
  m.load_params(p);
  return m;
}

class SchedulerTest : public ::testing::Test {
 protected:
  SchedulerTest() : model_(scheduler_model()), tokenizer_(io::Tokenizer::load("byte")) {}

  std::unique_ptr<Scheduler> scheduler(int64_t max_batch, int64_t max_queue, int64_t context = kContext) {
    return std::make_unique<Scheduler>(
        model_, SchedulerOptions{.max_batch = max_batch, .max_queue = max_queue, .context = context,
                                 .packed_weights = false});
  }
  // A request of `max_tokens` after a short prompt, sampled with its own seed.
  std::shared_ptr<Request> submit(Scheduler& s, int64_t max_tokens, uint64_t seed) {
    SamplingParams sampling;
    sampling.seed = seed;
    StopRules rules;
    rules.max_tokens = max_tokens;
    return s.submit(tokenizer_->encode("Once upon a time"), sampling, rules, tokenizer_.get());
  }
  std::shared_ptr<Request> submit_holding(Scheduler& s, uint64_t seed) { return submit(s, kContext - 32, seed); }

  // Waits until the request shows text (true) or ends without any (false).
  static bool shows_text(Request& r) {
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    std::string text;
    bool done = false;
    while (text.empty() && !done && std::chrono::steady_clock::now() < deadline) done = r.wait(text, 100ms);
    return !text.empty();
  }
  // Waits until the request ends; returns whether it did before the deadline.
  static bool ends(Request& r) {
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    std::string text;
    while (std::chrono::steady_clock::now() < deadline)
      if (r.wait(text, 100ms)) return true;
    return false;
  }
  // Whether the request is still waiting for a slot: no text, not ended.
  static bool still_waiting(Request& r) {
    std::string text;
    return !r.wait(text, 0ms) && text.empty();
  }
  static void cancel_and_end(Request& r) {
    r.cancel();
    ASSERT_TRUE(ends(r));
    EXPECT_EQ(r.error(), "cancelled");
  }

  model::Model<float> model_;
  std::unique_ptr<io::Tokenizer> tokenizer_;
};

TEST_F(SchedulerTest, WaitingRequestsTakeAFreedSlotInTheOrderTheyCame) {
  auto s = scheduler(/*max_batch=*/1, /*max_queue=*/4);
  const auto a = submit_holding(*s, 1);
  ASSERT_TRUE(a && shows_text(*a));
  const auto b = submit_holding(*s, 2), c = submit_holding(*s, 3);
  ASSERT_TRUE(b && c);
  EXPECT_EQ(s->queued(), 2);
  EXPECT_EQ(s->active(), 1);
  EXPECT_TRUE(still_waiting(*b) && still_waiting(*c));
  cancel_and_end(*a);
  ASSERT_TRUE(shows_text(*b));  // b came before c
  EXPECT_TRUE(still_waiting(*c));
  EXPECT_EQ(s->queued(), 1);
  cancel_and_end(*b);
  ASSERT_TRUE(shows_text(*c));
  cancel_and_end(*c);
}

TEST_F(SchedulerTest, AFullQueueRefusesTheNextRequest) {
  auto s = scheduler(/*max_batch=*/1, /*max_queue=*/1);
  const auto a = submit_holding(*s, 1);
  ASSERT_TRUE(a && shows_text(*a));
  const auto b = submit_holding(*s, 2);
  ASSERT_TRUE(b);
  EXPECT_EQ(submit(*s, 4, 3), nullptr);  // the slot is busy and the queue holds b
  EXPECT_EQ(s->queued(), 1);
  cancel_and_end(*a);
  ASSERT_TRUE(shows_text(*b));
  EXPECT_EQ(s->queued(), 0);
  const auto c = submit(*s, 4, 3);  // room in the queue again
  EXPECT_NE(c, nullptr);
  cancel_and_end(*b);
  ASSERT_TRUE(c && ends(*c));
}

TEST_F(SchedulerTest, RequestsShareTheSlotsAndAFreedSlotIsReused) {
  auto s = scheduler(/*max_batch=*/2, /*max_queue=*/4);
  const auto a = submit_holding(*s, 1), b = submit_holding(*s, 2);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(shows_text(*a) && shows_text(*b));  // both decode at once
  EXPECT_EQ(s->active(), 2);
  const auto c = submit_holding(*s, 3);
  ASSERT_TRUE(c);
  EXPECT_TRUE(still_waiting(*c));
  cancel_and_end(*a);  // evicted: its slot goes to c, b keeps decoding
  ASSERT_TRUE(shows_text(*c));
  EXPECT_TRUE(shows_text(*b));
  EXPECT_EQ(s->active(), 2);
  cancel_and_end(*b);
  cancel_and_end(*c);
  EXPECT_EQ(s->active(), 0);
}

TEST_F(SchedulerTest, ARequestEndsAtItsLengthAndDrainFinishesTheQueue) {
  auto s = scheduler(/*max_batch=*/1, /*max_queue=*/4);
  std::vector<std::shared_ptr<Request>> requests;
  for (uint64_t seed = 1; seed <= 3; ++seed) requests.push_back(submit(*s, 5, seed));
  s->drain();  // returns once every queued request has finished
  for (const auto& r : requests) {
    ASSERT_TRUE(r);
    std::string text;
    EXPECT_TRUE(r->wait(text, 0ms));
    EXPECT_EQ(r->finish_reason(), FinishReason::length);
    EXPECT_EQ(r->completion_tokens(), 5);
    EXPECT_EQ(r->prompt_tokens(), 16);
    EXPECT_EQ(r->error(), "");
  }
  EXPECT_EQ(s->active(), 0);
  EXPECT_EQ(submit(*s, 5, 4), nullptr);  // a drained scheduler takes nothing more
}

TEST_F(SchedulerTest, RefusesAPromptThatCannotFitTheContext) {
  auto s = scheduler(1, 4, /*context=*/20);
  EXPECT_EQ(s->context(), 20);
  const std::string e = error_of([&] { submit(*s, 5, 1); });  // 16 prompt tokens + 5 > 20
  EXPECT_TRUE(contains(e, "16 tokens") && contains(e, "max_tokens (5)") && contains(e, "20 tokens")) << e;
  EXPECT_NE(submit(*s, 4, 1), nullptr);  // 16 + 4 fits
}

}  // namespace
}  // namespace gatedlm::infer
