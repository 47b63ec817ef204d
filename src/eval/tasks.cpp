#include "eval/tasks.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "core/error.h"

namespace gatedlm::eval {
namespace {

const char* const kAdjectives[] = {"amber",  "brave",  "calm",   "dusty", "eager", "faint",  "gentle", "hollow",
                                   "icy",    "jolly",  "keen",   "lofty", "mellow", "noble", "olive",  "proud",
                                   "quiet",  "rapid",  "silent", "tidy",  "upper", "vivid", "wooden", "young"};
const char* const kNouns[] = {"apple",  "bridge", "candle", "desert", "engine", "forest", "garden", "harbor",
                              "island", "jacket", "kettle", "lantern", "meadow", "needle", "orchard", "pepper",
                              "quarry", "river",  "saddle", "tower",  "valley", "wagon",  "window", "zebra"};

std::vector<int32_t> encode(const io::Tokenizer& t, const std::string& text) { return t.encode(text); }

std::string random_key(Rng& rng) {
  return std::string(kAdjectives[rng.below(std::size(kAdjectives))]) + "-" + kNouns[rng.below(std::size(kNouns))];
}
std::string passkey_value(Rng& rng) { return std::to_string(10000 + rng.below(40001)); }  // 10000..50000
std::string magic_value(Rng& rng) { return std::to_string(1000000 + rng.below(9000000)); }  // 7 digits

// The texts. Needles end with ". " so that they read as sentences inside the neutral filler.
const char* kPasskeyInstruction = "There is a pass key hidden in this text. Remember it.\n";
const char* kNiahInstruction = "Some special magic numbers are hidden in this text. Remember them.\n";
std::string passkey_needle(const std::string& k) {
  return "The pass key is " + k + ". Remember it. " + k + " is the pass key. ";
}
const char* kPasskeyQuestion = "\nWhat is the pass key? The pass key is ";
std::string niah_needle(const std::string& key, const std::string& value) {
  return "One of the special magic numbers for " + key + " is: " + value + ". ";
}
std::string niah_question(const std::string& key) {
  return "\nWhat is the special magic number for " + key + "? The special magic number for " + key + " is ";
}
std::string niah_multivalue_question(const std::string& key) {
  return "\nWhat are all the special magic numbers for " + key + "? The special magic numbers for " + key + " are ";
}

struct Needle {
  std::vector<int32_t> ids;
  double depth = 0;
  std::string value;
};

// The example's text before filler is laid out: instruction, needles (target first) with
// their depths, question, answer values (joined by ", " when there are several).
struct Plan {
  std::string instruction;
  std::vector<Needle> needles;
  std::string question;
  std::vector<std::string> answers;  // filled in at assembly, in order of appearance
  std::string key;
};

Plan make_plan(TaskKind kind, const io::Tokenizer& tok, double depth, Rng& rng, const TaskShape& shape) {
  Plan p;
  switch (kind) {
    case TaskKind::passkey: {
      const std::string k = passkey_value(rng);
      p.instruction = kPasskeyInstruction;
      p.needles.push_back({encode(tok, passkey_needle(k)), depth, k});
      p.question = kPasskeyQuestion;
      p.key = k;
      break;
    }
    case TaskKind::niah_single:
    case TaskKind::niah_multikey: {
      p.key = random_key(rng);
      const std::string v = magic_value(rng);
      p.instruction = kNiahInstruction;
      p.needles.push_back({encode(tok, niah_needle(p.key, v)), depth, v});
      if (kind == TaskKind::niah_multikey) {
        std::set<std::string> used{p.key};
        for (int64_t d = 0; d < shape.multikey_distractors; ++d) {
          std::string other;
          do other = random_key(rng);
          while (!used.insert(other).second);  // ends: validate() keeps distractors below the key space
          p.needles.push_back({encode(tok, niah_needle(other, magic_value(rng))), rng.uniform(), ""});
        }
      }
      p.question = niah_question(p.key);
      break;
    }
    case TaskKind::niah_multivalue: {
      p.key = random_key(rng);
      p.instruction = kNiahInstruction;
      std::set<std::string> values;
      for (int64_t i = 0; i < std::max<int64_t>(shape.multivalue_values, 1); ++i) {
        std::string v;
        do v = magic_value(rng);
        while (!values.insert(v).second);
        p.needles.push_back({encode(tok, niah_needle(p.key, v)), i == 0 ? depth : rng.uniform(), v});
      }
      p.question = niah_multivalue_question(p.key);
      break;
    }
  }
  return p;
}

// Tokens of everything but filler: BOS, instruction, needles, question and the answer(s).
int64_t fixed_tokens(TaskKind kind, const io::Tokenizer& tok, const Plan& plan) {
  int64_t fixed = 1 + static_cast<int64_t>(encode(tok, plan.instruction).size() + encode(tok, plan.question).size());
  const int64_t separator = static_cast<int64_t>(encode(tok, ", ").size());
  const size_t answers = kind == TaskKind::niah_multivalue ? plan.needles.size() : 1;
  for (size_t a = 0; a < answers; ++a)
    fixed += static_cast<int64_t>(encode(tok, plan.needles[a].value).size()) + (a > 0 ? separator : 0);
  for (const Needle& n : plan.needles) fixed += static_cast<int64_t>(n.ids.size());
  return fixed;
}

}  // namespace

int64_t TaskShape::key_space() { return static_cast<int64_t>(std::size(kAdjectives) * std::size(kNouns)); }

void TaskShape::validate() const {
  if (multikey_distractors < 0 || multikey_distractors > key_space() - 1)
    fail("--distractors ", multikey_distractors, ": must be between 0 and ", key_space() - 1,
         " (there are ", key_space(), " distinct keys, one of them the queried key)");
  if (multivalue_values < 1 || multivalue_values > kMaxValues)
    fail("--values ", multivalue_values, ": must be between 1 and ", kMaxValues);
}

std::string to_string(TaskKind kind) {
  switch (kind) {
    case TaskKind::passkey: return "passkey";
    case TaskKind::niah_single: return "niah_single";
    case TaskKind::niah_multikey: return "niah_multikey";
    case TaskKind::niah_multivalue: return "niah_multivalue";
  }
  return "?";
}

const std::vector<TaskKind>& all_tasks() {
  static const std::vector<TaskKind> all{TaskKind::passkey, TaskKind::niah_single, TaskKind::niah_multikey,
                                         TaskKind::niah_multivalue};
  return all;
}

TaskKind parse_task(const std::string& name) {
  for (TaskKind k : all_tasks())
    if (to_string(k) == name) return k;
  fail("unknown task \"", name, "\" (expected passkey, niah_single, niah_multikey or niah_multivalue)");
}

Filler Filler::neutral(const io::Tokenizer& tokenizer) {
  Filler f;
  f.neutral_ = true;
  f.ids_ = tokenizer.encode(kNeutralFiller);
  if (f.ids_.empty()) fail("the neutral filler block encodes to no tokens");
  // Sentence starts inside the block: positions whose decoded prefix ends with ". ".
  for (size_t j = 0; j <= f.ids_.size(); ++j) {
    const std::string head = tokenizer.decode(std::vector<int32_t>(f.ids_.begin(), f.ids_.begin() + j));
    if (j == 0 || (head.size() >= 2 && head.compare(head.size() - 2, 2, ". ") == 0)) f.starts_.push_back(j);
  }
  return f;
}

Filler Filler::from_stream(const std::vector<int32_t>& stream, int32_t bos, int32_t eos) {
  Filler f;
  f.neutral_ = false;
  f.ids_.reserve(stream.size());
  for (int32_t id : stream)
    if (id != bos && id != eos) f.ids_.push_back(id);
  if (f.ids_.empty()) fail("filler text holds no tokens");
  return f;
}

std::vector<int32_t> Filler::take(int64_t n, Rng& rng) const {
  std::vector<int32_t> out;
  out.reserve(n);
  const int64_t size = static_cast<int64_t>(ids_.size());
  int64_t at = neutral_ ? 0 : static_cast<int64_t>(rng.below(static_cast<uint64_t>(size)));
  for (int64_t i = 0; i < n; ++i) {
    out.push_back(ids_[at]);
    at = (at + 1) % size;
  }
  return out;
}

int64_t Filler::snap(int64_t offset) const {
  if (!neutral_ || offset <= 0) return std::max<int64_t>(offset, 0);
  const int64_t block = static_cast<int64_t>(ids_.size());
  const int64_t base = offset / block * block, rest = offset % block;
  int64_t best = 0;
  for (int64_t s : starts_)
    if (s <= rest) best = s;
  return base + best;
}

TaskExample make_task_example(TaskKind kind, const io::Tokenizer& tok, const Filler& filler, int64_t length,
                              double depth, Rng& rng, const TaskShape& shape) {
  if (!(depth >= 0.0 && depth <= 1.0)) fail("needle depth ", depth, " is not in [0, 1]");
  shape.validate();
  Plan plan = make_plan(kind, tok, depth, rng, shape);
  const std::vector<int32_t> instruction = encode(tok, plan.instruction);
  const std::vector<int32_t> question = encode(tok, plan.question);
  const std::vector<int32_t> separator = encode(tok, ", ");

  // Answer values: the target's, or (multivalue) every value, put in order of appearance below.
  std::vector<size_t> answer_needles{0};
  if (kind == TaskKind::niah_multivalue) {
    answer_needles.resize(plan.needles.size());
    std::iota(answer_needles.begin(), answer_needles.end(), size_t{0});
  }
  const int64_t fixed = fixed_tokens(kind, tok, plan);
  const int64_t fill = length - fixed;
  if (fill < 0)
    fail(to_string(kind), ": a length of ", length, " tokens is too short (this example needs ", fixed,
         " tokens besides filler)");

  const std::vector<int32_t> filler_ids = filler.take(fill, rng);
  // Insertion offsets into the filler; in the neutral filler, at the start of a sentence.
  std::vector<int64_t> offsets(plan.needles.size());
  for (size_t i = 0; i < plan.needles.size(); ++i) {
    int64_t o = std::clamp<int64_t>(std::llround(plan.needles[i].depth * static_cast<double>(fill)), 0, fill);
    offsets[i] = filler.snap(o);
  }
  // Needles in order of position, the target first among equals.
  std::vector<size_t> order(plan.needles.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return offsets[a] < offsets[b] || (offsets[a] == offsets[b] && a < b);
  });
  if (kind == TaskKind::niah_multivalue) answer_needles = order;
  std::vector<std::string> answers;
  std::vector<std::vector<int32_t>> answer_ids;
  for (size_t i : answer_needles) {
    answers.push_back(plan.needles[i].value);
    answer_ids.push_back(encode(tok, plan.needles[i].value));
  }

  TaskExample ex;
  ex.kind = kind;
  ex.depth = depth;
  ex.filler_tokens = fill;
  ex.key = plan.key;
  ex.needle_starts.assign(plan.needles.size(), 0);
  ex.needle_ends.assign(plan.needles.size(), 0);
  std::vector<int32_t>& t = ex.tokens;
  t.reserve(length);
  t.push_back(tok.bos_id());
  t.insert(t.end(), instruction.begin(), instruction.end());
  int64_t taken = 0;
  for (size_t i : order) {
    t.insert(t.end(), filler_ids.begin() + taken, filler_ids.begin() + offsets[i]);
    taken = offsets[i];
    ex.needle_starts[i] = static_cast<int64_t>(t.size());
    t.insert(t.end(), plan.needles[i].ids.begin(), plan.needles[i].ids.end());
    ex.needle_ends[i] = static_cast<int64_t>(t.size());
  }
  t.insert(t.end(), filler_ids.begin() + taken, filler_ids.end());
  t.insert(t.end(), question.begin(), question.end());
  for (size_t a = 0; a < answers.size(); ++a) {
    if (a > 0) t.insert(t.end(), separator.begin(), separator.end());
    AnswerSpan span;
    span.begin = static_cast<int64_t>(t.size());
    t.insert(t.end(), answer_ids[a].begin(), answer_ids[a].end());
    span.end = static_cast<int64_t>(t.size());
    span.text = answers[a];
    ex.answers.push_back(span);
  }
  if (static_cast<int64_t>(t.size()) != length)
    fail("internal: ", to_string(kind), " example has ", t.size(), " tokens, not ", length);
  return ex;
}

int64_t task_min_length(TaskKind kind, const io::Tokenizer& tok, const TaskShape& shape) {
  // Keys and values differ in tokens from example to example: the most over a few draws.
  shape.validate();
  int64_t worst = 0;
  Rng rng(Rng::derive(0, "task_min_length"));
  for (int i = 0; i < 256; ++i) worst = std::max(worst, fixed_tokens(kind, tok, make_plan(kind, tok, 0.5, rng, shape)));
  return worst;
}

AnswerScore score_answer(const float* logits, int64_t vocab, const std::vector<int32_t>& tokens,
                         const AnswerSpan& span) {
  if (span.begin < 1 || span.end > static_cast<int64_t>(tokens.size()) || span.begin > span.end)
    fail("answer span [", span.begin, ", ", span.end, ") is outside the example of ", tokens.size(), " tokens");
  AnswerScore s;
  for (int64_t t = span.begin; t < span.end; ++t) {
    const float* row = logits + (t - 1) * vocab;
    const int32_t target = tokens[t];
    int64_t best = 0;
    double mx = row[0];
    for (int64_t v = 1; v < vocab; ++v)
      if (row[v] > mx) {
        mx = row[v];
        best = v;
      }
    double sum = 0.0;
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - mx);
    s.logprob += static_cast<double>(row[target]) - mx - std::log(sum);
    s.correct += best == target;
    ++s.tokens;
  }
  return s;
}

}  // namespace gatedlm::eval
