// Long-context tasks, scoring, `gatedlm longctx` and `gatedlm data synth`: needles where
// asked, answers at the end, a hand-built scoring case, the JSON keys, and bad flags
// rejected with messages that name them. Tiny models only.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "core/error.h"
#include "eval/longctx.h"
#include "eval/tasks.h"
#include "io/token_dataset.h"
#include "io/tokenizer.h"

namespace gatedlm::eval {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::run_gatedlm;

std::unique_ptr<io::Tokenizer> byte_tokenizer() { return io::Tokenizer::load("byte"); }

std::string decode(const io::Tokenizer& t, const std::vector<int32_t>& ids, int64_t begin, int64_t end) {
  return t.decode(std::vector<int32_t>(ids.begin() + begin, ids.begin() + end));
}

TEST(LongctxTasksTest, PasskeyNeedleSitsAtTheRequestedDepthAndTheAnswerEnds) {
  auto tok = byte_tokenizer();
  const Filler filler = Filler::neutral(*tok);
  const int64_t block = static_cast<int64_t>(std::string(kNeutralFiller).size());
  for (double depth : {0.0, 0.3, 0.5, 1.0}) {
    Rng rng(42);
    const TaskExample ex = make_task_example(TaskKind::passkey, *tok, filler, 1000, depth, rng);
    ASSERT_EQ(ex.tokens.size(), 1000u);
    EXPECT_EQ(ex.tokens[0], tok->bos_id());
    const std::string key = ex.key;
    ASSERT_EQ(key.size(), 5u);
    EXPECT_GE(std::stoi(key), 10000);
    EXPECT_LE(std::stoi(key), 50000);
    ASSERT_EQ(ex.needle_starts.size(), 1u);
    EXPECT_EQ(decode(*tok, ex.tokens, ex.needle_starts[0], ex.needle_ends[0]),
              "The pass key is " + key + ". Remember it. " + key + " is the pass key. ");
    // Depth: the needle starts depth * filler tokens after the instruction, moved back to
    // the start of a sentence of the neutral block (less than a block away).
    const int64_t instruction = static_cast<int64_t>(tok->encode("There is a pass key hidden in this text. Remember it.\n").size());
    const double want = 1 + instruction + depth * static_cast<double>(ex.filler_tokens);
    EXPECT_LE(static_cast<double>(ex.needle_starts[0]), want + 1e-9);
    EXPECT_GT(static_cast<double>(ex.needle_starts[0]), want - block);
    // The filler just before the needle ends a sentence (or there is none).
    const std::string before = decode(*tok, ex.tokens, 0, ex.needle_starts[0]);
    EXPECT_TRUE(before.ends_with(". ") || before.ends_with("\n")) << before.substr(before.size() - 10);
    ASSERT_EQ(ex.answers.size(), 1u);
    EXPECT_EQ(ex.answers[0].end, 1000);
    EXPECT_EQ(ex.answers[0].text, key);
    EXPECT_EQ(decode(*tok, ex.tokens, ex.answers[0].begin, ex.answers[0].end), key);
    EXPECT_TRUE(decode(*tok, ex.tokens, 0, ex.answers[0].begin).ends_with("What is the pass key? The pass key is "));
  }
}

TEST(LongctxTasksTest, NiahVariantsPlaceTheirNeedlesAndAnswers) {
  auto tok = byte_tokenizer();
  const Filler filler = Filler::neutral(*tok);
  TaskShape shape;
  shape.multikey_distractors = 3;
  shape.multivalue_values = 4;
  Rng rng(7);
  const TaskExample single = make_task_example(TaskKind::niah_single, *tok, filler, 800, 0.5, rng, shape);
  ASSERT_EQ(single.needle_starts.size(), 1u);
  ASSERT_EQ(single.answers.size(), 1u);
  EXPECT_EQ(single.answers[0].text.size(), 7u);
  EXPECT_EQ(decode(*tok, single.tokens, single.needle_starts[0], single.needle_ends[0]),
            "One of the special magic numbers for " + single.key + " is: " + single.answers[0].text + ". ");

  const TaskExample mk = make_task_example(TaskKind::niah_multikey, *tok, filler, 1200, 0.25, rng, shape);
  ASSERT_EQ(mk.needle_starts.size(), 4u);
  EXPECT_EQ(decode(*tok, mk.tokens, mk.needle_starts[0], mk.needle_ends[0]),
            "One of the special magic numbers for " + mk.key + " is: " + mk.answers[0].text + ". ");
  for (size_t i = 1; i < 4; ++i) {  // distractors: other keys
    const std::string n = decode(*tok, mk.tokens, mk.needle_starts[i], mk.needle_ends[i]);
    EXPECT_TRUE(n.starts_with("One of the special magic numbers for ")) << n;
    EXPECT_EQ(n.find(" " + mk.key + " "), std::string::npos) << n;
  }
  EXPECT_TRUE(decode(*tok, mk.tokens, 0, mk.answers[0].begin).ends_with("The special magic number for " + mk.key + " is "));

  const TaskExample mv = make_task_example(TaskKind::niah_multivalue, *tok, filler, 1200, 0.0, rng, shape);
  ASSERT_EQ(mv.needle_starts.size(), 4u);
  ASSERT_EQ(mv.answers.size(), 4u);
  // Answers in order of appearance, each from one needle, separated by ", ".
  std::vector<std::pair<int64_t, std::string>> seen;
  for (size_t i = 0; i < 4; ++i) {
    const std::string n = decode(*tok, mv.tokens, mv.needle_starts[i], mv.needle_ends[i]);
    seen.emplace_back(mv.needle_starts[i], n.substr(n.find(": ") + 2, 7));
  }
  std::sort(seen.begin(), seen.end());
  for (size_t a = 0; a < 4; ++a) {
    EXPECT_EQ(mv.answers[a].text, seen[a].second);
    EXPECT_EQ(decode(*tok, mv.tokens, mv.answers[a].begin, mv.answers[a].end), seen[a].second);
    if (a > 0) {
      EXPECT_EQ(decode(*tok, mv.tokens, mv.answers[a - 1].end, mv.answers[a].begin), ", ");
    }
  }
  EXPECT_EQ(mv.answers.back().end, 1200);
}

TEST(LongctxTasksTest, HeldOutFillerAndTooShortLengths) {
  auto tok = byte_tokenizer();
  std::vector<int32_t> stream{tok->bos_id()};
  for (int32_t id : tok->encode("Some held-out prose, with words and more words.\n")) stream.push_back(id);
  stream.push_back(tok->eos_id());
  const Filler filler = Filler::from_stream(stream, tok->bos_id(), tok->eos_id());
  Rng rng(3);
  const TaskExample ex = make_task_example(TaskKind::passkey, *tok, filler, 400, 0.5, rng);
  EXPECT_EQ(std::count(ex.tokens.begin(), ex.tokens.end(), tok->bos_id()), 1);
  EXPECT_EQ(std::count(ex.tokens.begin(), ex.tokens.end(), tok->eos_id()), 0);
  EXPECT_NE(tok->decode(ex.tokens).find("held-out prose"), std::string::npos);
  try {
    make_task_example(TaskKind::niah_multikey, *tok, filler, 100, 0.5, rng);
    ADD_FAILURE() << "a 100-token multikey example was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("too short"), std::string::npos) << e.what();
  }
  EXPECT_GT(task_min_length(TaskKind::niah_multikey, *tok), task_min_length(TaskKind::niah_single, *tok));
  EXPECT_THROW(make_task_example(TaskKind::passkey, *tok, filler, 400, 1.5, rng), Error);
}

TEST(LongctxScoringTest, TeacherForcedScoreOfAHandBuiltCase) {
  // vocab 4; tokens 0 1 2 3; the answer is tokens [2, 4) = "2 3", predicted by rows 1 and 2.
  const std::vector<int32_t> tokens{0, 1, 2, 3};
  const std::vector<float> logits{0, 0, 0, 0,   // row 0 (unused)
                                  0, 0, 2, 1,   // row 1: argmax 2 = target
                                  3, 0, 0, 1};  // row 2: argmax 0, target 3
  AnswerSpan span{2, 4, "23"};
  const AnswerScore s = score_answer(logits.data(), 4, tokens, span);
  EXPECT_EQ(s.tokens, 2);
  EXPECT_EQ(s.correct, 1);
  EXPECT_FALSE(s.recovered());
  const double lp1 = 2 - std::log(1 + 1 + std::exp(2.0) + std::exp(1.0));
  const double lp2 = 1 - std::log(std::exp(3.0) + 1 + 1 + std::exp(1.0));
  EXPECT_NEAR(s.logprob, lp1 + lp2, 1e-6);
  const AnswerScore one = score_answer(logits.data(), 4, tokens, AnswerSpan{2, 3, "2"});
  EXPECT_TRUE(one.recovered());

  RetrievalTally t;
  t.samples = 2;
  t.add(s);
  t.add(one);
  const json j = t.to_json();
  for (const char* key : {"samples", "values", "score", "digit_accuracy", "mean_logprob", "mean_token_logprob"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_DOUBLE_EQ(j["score"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(j["digit_accuracy"].get<double>(), 2.0 / 3.0);
  EXPECT_THROW(score_answer(logits.data(), 4, tokens, AnswerSpan{0, 2, ""}), Error);
}

TEST(LongctxConfigTest, OverridesAndAutoFactor) {
  model::ModelConfig c;
  c.vocab_size = 10, c.d_model = 8, c.n_layers = 1, c.n_heads = 1, c.n_kv_heads = 1, c.head_dim = 8;
  c.ffn_hidden = 8, c.rope_dims = 8, c.max_seq_len = 256;
  RopeOverride o;
  EXPECT_EQ(config_for_length(c, o, 1024).rope_scaling.type, model::RopeScalingType::none);
  o.type = model::RopeScalingType::yarn;
  EXPECT_EQ(config_for_length(c, o, 1024).rope_scaling.factor, 4.0);
  EXPECT_EQ(config_for_length(c, o, 128).rope_scaling.factor, 1.0);
  EXPECT_EQ(config_for_length(c, o, 1024).rope_scaling.original_max_seq_len, 256);
  o.original_len = 512;
  EXPECT_EQ(config_for_length(c, o, 1024).rope_scaling.factor, 2.0);
  o.factor = 8.0;
  o.rope_base = 1e6;
  const model::ModelConfig f = config_for_length(c, o, 1024);
  EXPECT_EQ(f.rope_scaling.factor, 8.0);
  EXPECT_EQ(f.rope_base, 1e6);
  RopeOverride bad;
  bad.factor = 2.0;  // a factor with no scaling
  EXPECT_THROW(config_for_length(c, bad, 512), Error);
  EXPECT_NO_THROW(check_lengths({256, 512, 1024}, "--lengths"));
  for (const std::vector<int64_t>& bad : {std::vector<int64_t>{}, {256, 256}, {-4}, {1}, {256, 0}}) {
    try {
      check_lengths(bad, "--lengths");
      ADD_FAILURE() << "accepted " << bad.size() << " lengths";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--lengths"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace gatedlm::eval
