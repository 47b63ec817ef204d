#pragma once
// Synthetic long-context retrieval tasks (docs/longctx.md, docs/metrics.md "Long-context
// tasks"), built in token space so that they work with any tokenizer:
//   passkey          instruction, filler, "The pass key is K. Remember it. K is the pass key.",
//                    more filler, "What is the pass key? The pass key is " K.
//                    K is uniform in 10000..50000, so always 5 digits.
//   niah_single      RULER-style needle "One of the special magic numbers for {key} is: {value}."
//                    in filler, then the question for {key}; values have 7 digits.
//   niah_multikey    the same with distractor needles for other keys (and other values).
//   niah_multivalue  several needles with the same key; the answer lists every value in
//                    order of appearance, separated by ", ".
// Each piece of text (instruction, needle, question, answer) is encoded on its own and the
// pieces' ids are concatenated, so an answer's tokens are exactly the ids of its digits
// whatever the tokenizer merges across piece boundaries. An example is BOS + pieces, exactly
// the requested length, with the answer at the very end (so no generation is needed:
// answers are scored teacher-forced from one forward pass).
#include <cstdint>
#include <string>
#include <vector>

#include "core/rng.h"
#include "io/tokenizer.h"

namespace gatedlm::eval {

enum class TaskKind { passkey, niah_single, niah_multikey, niah_multivalue };
std::string to_string(TaskKind kind);
TaskKind parse_task(const std::string& name);  // throws listing the names
const std::vector<TaskKind>& all_tasks();

// The neutral filler block of the passkey test (Mohtashami & Jaggi 2023), repeated.
inline constexpr const char* kNeutralFiller =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. ";

// Where filler tokens come from: the neutral block repeated, or contiguous slices of a
// token stream (held-out text) with BOS/EOS ids dropped.
class Filler {
 public:
  static Filler neutral(const io::Tokenizer& tokenizer);
  static Filler from_stream(const std::vector<int32_t>& stream, int32_t bos, int32_t eos);
  // n filler tokens; the neutral block starts at a random phase, a stream at a random offset.
  std::vector<int32_t> take(int64_t n, Rng& rng) const;
  bool is_neutral() const { return neutral_; }
  // A needle's insertion offset into filler from take(): in the neutral filler the start
  // of the sentence at or before `offset`; unchanged for a stream.
  int64_t snap(int64_t offset) const;

 private:
  bool neutral_ = true;
  std::vector<int32_t> ids_;     // one block, or the stream without special ids
  std::vector<int64_t> starts_;  // neutral: sentence starts within the block (0 first)
};

struct AnswerSpan {
  int64_t begin = 0, end = 0;  // token positions [begin, end) in the example
  std::string text;            // the value, e.g. "31415"
};

struct TaskExample {
  TaskKind kind = TaskKind::passkey;
  std::vector<int32_t> tokens;        // BOS first, exactly the requested length
  std::vector<AnswerSpan> answers;    // at the end of tokens, in order
  std::vector<int64_t> needle_starts; // token position of each needle; the target's first
  std::vector<int64_t> needle_ends;
  double depth = 0;                   // requested depth of the target needle in [0, 1]
  int64_t filler_tokens = 0;          // tokens of filler (the rest is fixed text)
  std::string key;                    // niah: the queried key; passkey: the pass key
};

struct TaskShape {
  int64_t multikey_distractors = 3;  // other keys' needles in niah_multikey
  int64_t multivalue_values = 4;     // values of the key in niah_multivalue
  static constexpr int64_t kMaxValues = 100000;
  static int64_t key_space();  // distinct keys (adjective-noun pairs)
  // Throws naming --distractors / --values when a key or value could not be drawn unique.
  void validate() const;
};

// One example of exactly `length` tokens whose target needle starts at about `depth` of
// the filler (0 = right after the instruction, 1 = right before the question); other
// needles at uniform depths. Throws when `length` cannot hold the fixed text.
TaskExample make_task_example(TaskKind kind, const io::Tokenizer& tokenizer, const Filler& filler, int64_t length,
                              double depth, Rng& rng, const TaskShape& shape = {});

// Tokens an example needs besides filler (BOS, instruction, needles, question, answers):
// the most over 256 random draws (keys and values differ in tokens), so a length below this
// is too short for the task and one at it almost always long enough.
int64_t task_min_length(TaskKind kind, const io::Tokenizer& tokenizer, const TaskShape& shape = {});

// Teacher-forced score of one answer from the logits of a forward pass over the example
// (row t of logits [seq, vocab] predicts token t + 1).
struct AnswerScore {
  int64_t tokens = 0;    // answer tokens
  int64_t correct = 0;   // of them, the argmax of the previous row
  double logprob = 0;    // sum of log p(token) over the answer
  bool recovered() const { return tokens > 0 && correct == tokens; }
};
AnswerScore score_answer(const float* logits, int64_t vocab, const std::vector<int32_t>& tokens,
                         const AnswerSpan& span);

}  // namespace gatedlm::eval
