#include "eval/synth_bigram_backcopy.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/progress.h"
#include "io/text_corpus.h"
#include "io/token_dataset.h"
#include "io/tokenizer.h"

namespace gatedlm::eval {

using nlohmann::json;

BigramModel BigramModel::estimate(const std::vector<std::vector<int32_t>>& documents) {
  std::map<int32_t, int64_t> counts;
  std::map<int32_t, std::map<int32_t, int64_t>> pairs;
  int64_t n_pairs = 0;
  for (const auto& doc : documents)
    for (size_t i = 0; i < doc.size(); ++i) {
      if (doc[i] < 0) fail("bigram model: negative token id ", doc[i]);
      ++counts[doc[i]];
      if (i + 1 < doc.size()) ++pairs[doc[i]][doc[i + 1]], ++n_pairs;
    }
  if (counts.size() < 2) fail("bigram model: the corpus uses ", counts.size(), " distinct token(s); at least 2 are needed");
  if (n_pairs == 0) fail("bigram model: the corpus has no pair of consecutive tokens");
  BigramModel m;
  for (const auto& [id, c] : counts) {
    m.symbols_.push_back(id);
    m.counts_.push_back(c);
    m.row_begin_.push_back(static_cast<int64_t>(m.row_next_.size()));
    int64_t cum = 0;
    if (auto it = pairs.find(id); it != pairs.end())
      for (const auto& [to, c2] : it->second) {
        cum += c2;
        m.row_next_.push_back(to);
        m.row_cum_.push_back(cum);
      }
  }
  m.row_begin_.push_back(static_cast<int64_t>(m.row_next_.size()));
  return m;
}

int64_t BigramModel::index_of(int32_t id) const {
  const auto it = std::lower_bound(symbols_.begin(), symbols_.end(), id);
  return it != symbols_.end() && *it == id ? it - symbols_.begin() : -1;
}

int64_t BigramModel::count(int32_t id) const {
  const int64_t i = index_of(id);
  return i < 0 ? 0 : counts_[i];
}

int64_t BigramModel::row_total(int32_t from) const {
  const int64_t r = index_of(from);
  if (r < 0 || row_begin_[r] == row_begin_[r + 1]) return 0;
  return row_cum_[row_begin_[r + 1] - 1];
}

int64_t BigramModel::pair_count(int32_t from, int32_t to) const {
  const int64_t r = index_of(from);
  if (r < 0) return 0;
  const auto b = row_next_.begin() + row_begin_[r], e = row_next_.begin() + row_begin_[r + 1];
  const auto it = std::lower_bound(b, e, to);
  if (it == e || *it != to) return 0;
  const int64_t k = it - row_next_.begin();
  return row_cum_[k] - (k > row_begin_[r] ? row_cum_[k - 1] : 0);
}

std::vector<int32_t> BigramModel::most_frequent(int64_t k) const {
  std::vector<int64_t> order(symbols_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return counts_[a] > counts_[b]; });
  std::vector<int32_t> out;
  for (int64_t i = 0; i < std::min<int64_t>(k, static_cast<int64_t>(order.size())); ++i)
    out.push_back(symbols_[order[i]]);
  return out;
}

int32_t BigramModel::draw_marginal(const std::vector<int32_t>& excluded, Rng& rng) const {
  int64_t total = 0;
  for (size_t i = 0; i < symbols_.size(); ++i)
    if (!std::binary_search(excluded.begin(), excluded.end(), symbols_[i])) total += counts_[i];
  if (total == 0) fail("bigram model: every symbol is excluded from the first position");
  int64_t u = static_cast<int64_t>(rng.below(static_cast<uint64_t>(total)));
  for (size_t i = 0; i < symbols_.size(); ++i) {
    if (std::binary_search(excluded.begin(), excluded.end(), symbols_[i])) continue;
    if (u < counts_[i]) return symbols_[i];
    u -= counts_[i];
  }
  return symbols_.back();  // not reached: u < total
}

int32_t BigramModel::first(const std::vector<int32_t>& excluded, Rng& rng) const { return draw_marginal(excluded, rng); }

int32_t BigramModel::next(int32_t from, Rng& rng) const {
  const int64_t r = index_of(from);
  if (r < 0) fail("bigram model: token ", from, " is not a symbol of the corpus");
  const int64_t b = row_begin_[r], e = row_begin_[r + 1];
  if (b == e) return draw_marginal({}, rng);
  const int64_t u = static_cast<int64_t>(rng.below(static_cast<uint64_t>(row_cum_[e - 1])));
  // The first successor whose cumulative count exceeds u.
  const auto it = std::upper_bound(row_cum_.begin() + b, row_cum_.begin() + e, u);
  return row_next_[it - row_cum_.begin()];
}

std::vector<int32_t> bigram_backcopy_chain(const BigramModel& bigram, const std::vector<int32_t>& triggers, int64_t n,
                                           Rng& rng) {
  std::vector<int32_t> sorted = triggers;
  std::sort(sorted.begin(), sorted.end());
  auto is_trigger = [&](int32_t id) { return std::binary_search(sorted.begin(), sorted.end(), id); };
  std::vector<int32_t> chain;
  chain.reserve(static_cast<size_t>(std::max<int64_t>(n, 0)));
  for (int64_t i = 0; i < n; ++i) {
    if (i == 0)
      chain.push_back(bigram.first(sorted, rng));
    else if (is_trigger(chain[i - 1]))
      chain.push_back(chain[i - 2]);  // i >= 2: the first symbol is no trigger
    else
      chain.push_back(bigram.next(chain[i - 1], rng));
  }
  return chain;
}

namespace {

// The corpus as one id sequence per file.
std::vector<std::vector<int32_t>> tokenize_corpus(const std::vector<std::string>& inputs, const io::Tokenizer& tok,
                                                  bool byte, json& sources) {
  std::vector<std::vector<int32_t>> docs;
  for (const std::string& file : io::collect_text_files(inputs)) {
    const std::string text = io::read_text_file(file);
    if (!byte && io::find_invalid_utf8(text) >= 0) fail(file, ": not valid UTF-8 (use --tokenizer byte)");
    std::vector<int32_t> ids;
    for (std::string_view piece : io::split_text(text, size_t{1} << 16)) {
      const std::vector<int32_t> p = tok.encode(piece);
      ids.insert(ids.end(), p.begin(), p.end());
    }
    sources.push_back(io::source_record(file, text, static_cast<int64_t>(text.size()), 0));
    docs.push_back(std::move(ids));
  }
  return docs;
}

// The flags' checks; returns the number of training documents.
int64_t checked_train_docs(const BigramBackcopyOptions& o) {
  if (o.corpus.empty()) fail("--corpus PATH is required (the text the bigram model is estimated from)");
  if (o.out.empty()) fail("--out DIR is required");
  if (o.tokenizer.empty()) fail("--tokenizer FILE|byte is required");
  if (o.seq_len < 3) fail("--seq-len must be at least 3 (BOS and two symbols), got ", o.seq_len);
  if (o.count < 0) fail("--count must not be negative, got ", o.count);
  if (o.tokens < 0) fail("--tokens must not be negative, got ", o.tokens);
  if (o.count > 0 && o.tokens > 0) fail("give --count or --tokens, not both");
  if (!(o.val_fraction >= 0 && o.val_fraction < 1)) fail("--val-fraction ", o.val_fraction, " is not in [0, 1)");
  if (o.trigger_ids.empty() && o.triggers < 1) fail("--triggers must be at least 1, got ", o.triggers);
  const int64_t docs_wanted =
      o.count > 0 ? o.count : ((o.tokens > 0 ? o.tokens : int64_t{1000000}) + o.seq_len) / (o.seq_len + 1);
  const int64_t train_docs = std::max<int64_t>(1, docs_wanted);
  if (train_docs > (int64_t{1} << 32) / (o.seq_len + 1))
    fail("--count/--tokens: ", train_docs, " documents of ", o.seq_len, " tokens exceed 2^32 tokens");
  return train_docs;
}

// --trigger-ids checked against the corpus, or its --triggers most frequent symbols.
std::vector<int32_t> choose_triggers(const BigramBackcopyOptions& o, const BigramModel& bigram) {
  const int64_t n_symbols = static_cast<int64_t>(bigram.symbols().size());
  if (o.trigger_ids.empty()) {
    if (o.triggers >= n_symbols)
      fail("--triggers ", o.triggers, ": the corpus has only ", n_symbols,
           " distinct symbols, and at least one must not be a trigger");
    return bigram.most_frequent(o.triggers);
  }
  std::vector<int32_t> sorted = o.trigger_ids;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) fail("--trigger-ids: an id is given twice");
  for (int32_t id : o.trigger_ids)
    if (bigram.count(id) == 0) fail("--trigger-ids: token ", id, " does not occur in the corpus");
  if (static_cast<int64_t>(o.trigger_ids.size()) >= n_symbols)
    fail("--trigger-ids: every symbol of the corpus is a trigger; at least one must not be");
  return o.trigger_ids;
}

// Writes the documents of one split: BOS + chain of seq_len - 1 symbols + EOS, each from
// its own seeded stream; counts the training chains' trigger positions.
class SplitWriter {
 public:
  SplitWriter(const BigramBackcopyOptions& o, const BigramModel& bigram, const std::vector<int32_t>& triggers,
              const io::Tokenizer& tok)
      : o_(o), bigram_(bigram), triggers_(triggers), tok_(tok),
        piece_bytes_(static_cast<size_t>(tok.vocab_size()), 1.0) {
    if (o.tokenizer != "byte")
      for (int32_t s : bigram.symbols()) piece_bytes_[s] = static_cast<double>(tok.decode({s}).size());
  }

  void write(const std::string& stream, int64_t docs, std::vector<uint32_t>& out, io::SplitInfo& info) {
    out.reserve(static_cast<size_t>(docs * (o_.seq_len + 1)));
    Progress progress(cat("bigram-backcopy ", stream), docs);
    double bytes = 0;
    for (int64_t d = 0; d < docs; ++d) {
      Rng rng(Rng::derive(o_.seed, cat("bigram-backcopy/", stream, "/", d)));
      const std::vector<int32_t> chain = bigram_backcopy_chain(bigram_, triggers_, o_.seq_len - 1, rng);
      out.push_back(static_cast<uint32_t>(tok_.bos_id()));
      for (int32_t s : chain) {
        out.push_back(static_cast<uint32_t>(s));
        bytes += piece_bytes_[s];
        if (stream == "train") {
          trigger_positions_ += std::find(triggers_.begin(), triggers_.end(), s) != triggers_.end();
          ++chain_positions_;
        }
      }
      out.push_back(static_cast<uint32_t>(tok_.eos_id()));
      progress.update(d + 1);
    }
    progress.finish();
    info.tokens = static_cast<int64_t>(out.size());
    info.documents = docs;
    info.bytes = std::llround(bytes);
  }

  // The share of the training chains' positions that hold a trigger.
  double trigger_share() const {
    return chain_positions_ > 0 ? static_cast<double>(trigger_positions_) / static_cast<double>(chain_positions_) : 0;
  }

 private:
  const BigramBackcopyOptions& o_;
  const BigramModel& bigram_;
  const std::vector<int32_t>& triggers_;
  const io::Tokenizer& tok_;
  std::vector<double> piece_bytes_;  // [vocab] decoded bytes of each symbol (1 for the byte tokenizer)
  int64_t trigger_positions_ = 0, chain_positions_ = 0;
};

json synthetic_record(const BigramBackcopyOptions& o, const BigramBackcopySummary& s, const BigramModel& bigram,
                      const io::Tokenizer& tok) {
  json trigger_info = json::array();
  for (int32_t t : s.triggers)
    trigger_info.push_back({{"id", t}, {"text", tok.decode({t})}, {"corpus_count", bigram.count(t)}});
  return {{"task", "bigram-backcopy"},
          {"symbols", s.symbols},
          {"triggers", trigger_info},
          {"trigger_share", s.trigger_share},
          {"seq_len", o.seq_len},
          {"train_documents", s.train_documents},
          {"val_documents", s.val_documents},
          {"seed", o.seed}};
}

}  // namespace

BigramBackcopySummary synthesize_bigram_backcopy(const BigramBackcopyOptions& o) {
  const int64_t train_docs = checked_train_docs(o);
  const std::unique_ptr<io::Tokenizer> tok = io::Tokenizer::load(o.tokenizer);
  json sources = json::array();
  const BigramModel bigram = BigramModel::estimate(tokenize_corpus(o.corpus, *tok, o.tokenizer == "byte", sources));
  const std::vector<int32_t> triggers = choose_triggers(o, bigram);

  SplitWriter writer(o, bigram, triggers, *tok);
  const int64_t val_docs = std::max<int64_t>(1, std::llround(static_cast<double>(train_docs) * o.val_fraction));
  std::vector<uint32_t> train_ids, val_ids;
  io::SplitInfo train, val;
  writer.write("train", train_docs, train_ids, train);
  writer.write("val", val_docs, val_ids, val);

  BigramBackcopySummary s;
  s.symbols = static_cast<int64_t>(bigram.symbols().size());
  s.train_documents = train_docs;
  s.val_documents = val_docs;
  s.train_tokens = train.tokens;
  s.val_tokens = val.tokens;
  s.triggers = triggers;
  s.trigger_share = writer.trigger_share();
  const json extra = {{"synthetic", synthetic_record(o, s, bigram, *tok)}};
  io::write_token_dataset(o.out, o.tokenizer, train_ids, val_ids, train, val, sources.dump(), o.val_fraction,
                          extra.dump(), o.force);
  return s;
}

}  // namespace gatedlm::eval
