#include "eval/synth.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/rng.h"
#include "io/text_corpus.h"
#include "io/token_dataset.h"
#include "io/tokenizer.h"

namespace gatedlm::eval {
namespace {

using nlohmann::json;

constexpr size_t kTextPiece = 2048;  // bytes per encoded text piece (cut after a newline)

struct Doc {
  std::vector<int32_t> ids;  // without BOS/EOS
  int64_t bytes = 0;
};

void append_doc(std::vector<uint32_t>& out, const std::vector<int32_t>& ids, const io::Tokenizer& tok,
                bool has_bos) {
  if (!has_bos) out.push_back(static_cast<uint32_t>(tok.bos_id()));
  for (int32_t id : ids) out.push_back(static_cast<uint32_t>(id));
  out.push_back(static_cast<uint32_t>(tok.eos_id()));
}

// The flags' checks; returns the shortest example length (--min-len or its default).
int64_t checked_min_len(const SynthOptions& o) {
  if (o.task != "passkey" && o.task != "niah" && o.task != "all")
    fail("--task: unknown task \"", o.task, "\" (passkey, niah, all or bigram-backcopy)");
  if (o.out.empty()) fail("--out DIR is required");
  if (o.tokenizer.empty()) fail("--tokenizer FILE|byte is required");
  if (o.seq_len < 2) fail("--seq-len must be at least 2, got ", o.seq_len);
  if (o.count < 0) fail("--count must not be negative, got ", o.count);
  const int64_t min_len = o.min_len > 0 ? o.min_len : std::max<int64_t>(2, o.seq_len / 4);
  if (o.min_len < 0 || min_len > o.seq_len)
    fail("--min-len (", o.min_len, ") must be between 1 and --seq-len (", o.seq_len, ")");
  if (!(o.val_fraction >= 0 && o.val_fraction < 1)) fail("--val-fraction ", o.val_fraction, " is not in [0, 1)");
  if (o.mix_text.empty()) {
    if (o.ratio != 0) fail("--ratio needs --mix-text PATH (the text to mix the examples with)");
  } else {
    if (o.ratio != 0 && o.count > 0) fail("give --ratio or --count with --mix-text, not both");
    if (o.ratio == 0 && o.count == 0) fail("--mix-text needs --ratio R (the synthetic share of training tokens)");
    if (o.ratio != 0 && !(o.ratio > 0 && o.ratio < 1)) fail("--ratio ", o.ratio, " is not in (0, 1)");
  }
  return min_len;
}

// Draws example i of a stream ("train" or "val"): the tasks of --task in turn, each of a
// length from [max(min_len, the task's minimum), seq_len] and a needle depth from [0, 1).
class ExampleMaker {
 public:
  ExampleMaker(const SynthOptions& o, const io::Tokenizer& tok, int64_t min_len)
      : o_(o), tok_(tok), min_len_(min_len), filler_(Filler::neutral(tok)) {
    // Filler: the neutral block, or the tokens of --filler (never the evaluation's held-out split).
    if (!o.filler.empty()) {
      const std::string text = io::read_text_file(o.filler);
      filler_ = Filler::from_stream(tok.encode(text), tok.bos_id(), tok.eos_id());
    }
    kinds_ = all_tasks();  // all: passkey and the three needle tasks in turn
    if (o.task == "passkey") kinds_ = {TaskKind::passkey};
    if (o.task == "niah") kinds_ = {TaskKind::niah_single, TaskKind::niah_multikey, TaskKind::niah_multivalue};
    for (TaskKind k : kinds_) {
      need_.push_back(task_min_length(k, tok, o.shape));
      if (need_.back() > o.seq_len)
        fail("--seq-len ", o.seq_len, " is too short for ", to_string(k), " with this tokenizer (it needs at least ",
             need_.back(), " tokens)");
    }
  }

  Doc operator()(const std::string& stream, int64_t i) const {
    const uint64_t seed = Rng::derive(o_.seed, cat("synth/", stream, "/", i));
    Rng rng(seed);
    const size_t k = static_cast<size_t>(i) % kinds_.size();
    const int64_t lo = std::max(min_len_, need_[k]);
    int64_t length = lo + static_cast<int64_t>(rng.below(static_cast<uint64_t>(o_.seq_len - lo + 1)));
    const double depth = rng.uniform();
    const Rng start = rng;
    TaskExample ex;
    for (;;) {  // a draw with longer keys than task_min_length saw: the same example, a little longer
      try {
        Rng r = start;
        ex = make_task_example(kinds_[k], tok_, filler_, length, depth, r, o_.shape);
        break;
      } catch (const Error&) {
        if (length >= o_.seq_len) throw;
        length = std::min(o_.seq_len, length + 4);
      }
    }
    Doc d;
    d.ids = ex.tokens;  // BOS first
    d.bytes = static_cast<int64_t>(tok_.decode(std::vector<int32_t>(ex.tokens.begin() + 1, ex.tokens.end())).size());
    return d;
  }

 private:
  const SynthOptions& o_;
  const io::Tokenizer& tok_;
  int64_t min_len_;
  Filler filler_;
  std::vector<TaskKind> kinds_;
  std::vector<int64_t> need_;  // [kinds_] each task's shortest example
};

// The text of --mix-text: each file's training part in newline-cut pieces, its tail
// appended to the validation split.
struct MixText {
  std::vector<Doc> pieces;
  int64_t tokens = 0;  // over the pieces
  json sources = json::array();
};
MixText read_mix_text(const SynthOptions& o, const io::Tokenizer& tok, std::vector<uint32_t>& val_ids,
                      io::SplitInfo& val) {
  MixText m;
  if (o.mix_text.empty()) return m;
  for (const std::string& file : io::collect_text_files({o.mix_text})) {
    const std::string text = io::read_text_file(file);
    if (o.tokenizer != "byte" && io::find_invalid_utf8(text) >= 0) fail(file, ": not valid UTF-8 (use --tokenizer byte)");
    const size_t cut = io::validation_cut(text, o.val_fraction);
    const std::string_view all(text), head = all.substr(0, cut), tail = all.substr(cut);
    for (std::string_view p : io::split_text(head, kTextPiece)) {
      m.pieces.push_back(Doc{tok.encode(p), static_cast<int64_t>(p.size())});
      m.tokens += static_cast<int64_t>(m.pieces.back().ids.size());
    }
    if (!tail.empty()) {
      append_doc(val_ids, tok.encode(tail), tok, false);
      val.bytes += static_cast<int64_t>(tail.size());
      ++val.documents;
    }
    m.sources.push_back(
        io::source_record(file, text, static_cast<int64_t>(head.size()), static_cast<int64_t>(tail.size())));
  }
  if (m.tokens == 0) fail(o.mix_text, ": no training text to mix with");
  return m;
}

// The text pieces joined into at most `examples + 1` documents of about equal size.
std::vector<Doc> text_documents(const std::vector<Doc>& pieces, int64_t text_tokens, int64_t examples) {
  std::vector<Doc> text_docs;
  if (pieces.empty()) return text_docs;
  const int64_t groups = std::min<int64_t>(examples + 1, static_cast<int64_t>(pieces.size()));
  size_t next = 0;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t target = (g + 1) * text_tokens / groups;
    Doc d;
    int64_t so_far = 0;
    for (const Doc& t : text_docs) so_far += static_cast<int64_t>(t.ids.size());
    while (next < pieces.size() && (so_far + static_cast<int64_t>(d.ids.size()) < target || d.ids.empty())) {
      d.ids.insert(d.ids.end(), pieces[next].ids.begin(), pieces[next].ids.end());
      d.bytes += pieces[next].bytes;
      ++next;
    }
    if (g == groups - 1)
      for (; next < pieces.size(); ++next) {
        d.ids.insert(d.ids.end(), pieces[next].ids.begin(), pieces[next].ids.end());
        d.bytes += pieces[next].bytes;
      }
    if (!d.ids.empty()) text_docs.push_back(std::move(d));
  }
  return text_docs;
}

// The training split: text documents with the examples spread evenly between them.
void interleave(std::vector<uint32_t>& train_ids, io::SplitInfo& train, const std::vector<Doc>& text_docs,
                const std::vector<Doc>& examples, const io::Tokenizer& tok) {
  auto add = [&](const Doc& doc, bool has_bos) {
    append_doc(train_ids, doc.ids, tok, has_bos);
    train.bytes += doc.bytes;
    ++train.documents;
  };
  const int64_t n = static_cast<int64_t>(examples.size()), p = static_cast<int64_t>(text_docs.size());
  if (p == 0) {
    for (const Doc& e : examples) add(e, true);
    return;
  }
  for (int64_t j = 0; j < p; ++j) {
    add(text_docs[j], false);
    for (int64_t e = j * n / p; e < (j + 1) * n / p; ++e) add(examples[e], true);
  }
}

json synthetic_record(const SynthOptions& o, const SynthSummary& s, int64_t min_len) {
  const int64_t all_tokens = s.text_tokens + s.synthetic_tokens;
  return {{"task", o.task},
          {"examples", s.train_examples},
          {"val_examples", s.val_examples},
          {"synthetic_tokens", s.synthetic_tokens},
          {"text_tokens", s.text_tokens},
          {"ratio", all_tokens > 0 ? static_cast<double>(s.synthetic_tokens) / static_cast<double>(all_tokens) : 1.0},
          {"seq_len", o.seq_len},
          {"min_len", min_len},
          {"seed", o.seed},
          {"filler", o.filler.empty() ? "neutral" : o.filler},
          {"multikey_distractors", o.shape.multikey_distractors},
          {"multivalue_values", o.shape.multivalue_values}};
}

}  // namespace

SynthSummary synthesize_dataset(const SynthOptions& o) {
  const int64_t min_len = checked_min_len(o);
  const std::unique_ptr<io::Tokenizer> tok = io::Tokenizer::load(o.tokenizer);
  const ExampleMaker make(o, *tok, min_len);
  std::vector<uint32_t> train_ids, val_ids;
  io::SplitInfo train, val;
  MixText text = read_mix_text(o, *tok, val_ids, val);

  // The examples: --count, or until they are --ratio of the training tokens.
  std::vector<Doc> examples;
  int64_t synthetic_tokens = 0;
  const double want = o.ratio > 0 ? o.ratio / (1.0 - o.ratio) * static_cast<double>(text.tokens) : 0.0;
  const int64_t count = o.count > 0 ? o.count : (o.mix_text.empty() ? 1000 : 0);
  for (int64_t i = 0; count > 0 ? i < count : static_cast<double>(synthetic_tokens) < want; ++i) {
    examples.push_back(make("train", i));
    synthetic_tokens += static_cast<int64_t>(examples.back().ids.size()) + 1;  // + EOS
  }
  const int64_t n = static_cast<int64_t>(examples.size());
  interleave(train_ids, train, text_documents(text.pieces, text.tokens, n), examples, *tok);

  // Validation: the text's tail, or (no text) examples from their own stream.
  int64_t val_examples = 0;
  if (o.mix_text.empty()) {
    val_examples = std::max<int64_t>(1, std::llround(static_cast<double>(n) * o.val_fraction));
    for (int64_t i = 0; i < val_examples; ++i) {
      const Doc d = make("val", i);
      append_doc(val_ids, d.ids, *tok, true);
      val.bytes += d.bytes;
      ++val.documents;
    }
  }
  train.tokens = static_cast<int64_t>(train_ids.size());
  val.tokens = static_cast<int64_t>(val_ids.size());
  const SynthSummary summary{n, val_examples, synthetic_tokens, text.tokens};
  text.sources.push_back(json{{"path", "synthetic:" + o.task}, {"examples", n}, {"tokens", synthetic_tokens}});
  const json extra = {{"synthetic", synthetic_record(o, summary, min_len)}};
  io::write_token_dataset(o.out, o.tokenizer, train_ids, val_ids, train, val, text.sources.dump(),
                          o.mix_text.empty() ? 0.0 : o.val_fraction, extra.dump(), o.force);
  return summary;
}

}  // namespace gatedlm::eval
