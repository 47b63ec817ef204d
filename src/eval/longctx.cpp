#include "eval/longctx.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <sstream>

#include "core/error.h"
#include "core/rng.h"
#include "model/model.h"
#include "model/rope_scaling.h"
#include "io/token_windows.h"

namespace gatedlm::eval {

using nlohmann::json;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

json rope_json(const model::ModelConfig& c) {
  const model::ScaledRope r =
      model::scaled_rope(c.rope_dims, c.rope_base, c.rope_scaling, c.rope_scaling.original_max_seq_len);
  return json{{"scaling", model::to_string(c.rope_scaling.type)},
              {"factor", c.rope_scaling.factor},
              {"original_len", c.rope_scaling.original_max_seq_len},
              {"rope_base", c.rope_base},
              {"magnitude", r.magnitude}};
}

// Perplexity by position on held-out windows [BOS] + s[o : o+L-1] predicting s[o : o+L].
json position_perplexity(model::Model<float>& m, const LongctxInput& in, const LongctxOptions& o, int64_t length,
                         int64_t train_len) {
  const auto offsets = io::evaluation_offsets(static_cast<int64_t>(in.heldout.size()), length,
                                                 o.ppl_windows * length);
  if (offsets.empty())
    return json{{"skipped", cat("the held-out text has ", in.heldout.size(), " tokens, fewer than one window of ",
                                length)}};
  const int64_t buckets = std::min(o.buckets, length);
  std::vector<double> bucket_loss(buckets, 0.0), bucket_n(buckets, 0.0);
  double within = 0, within_n = 0, beyond = 0, beyond_n = 0;
  const int64_t batch = std::max<int64_t>(1, o.batch_tokens / length);
  for (size_t first = 0; first < offsets.size(); first += batch) {
    const int64_t rows = std::min<int64_t>(batch, static_cast<int64_t>(offsets.size() - first));
    io::Batch b{rows, length, std::vector<int32_t>(rows * length), std::vector<int32_t>(rows * length)};
    for (int64_t r = 0; r < rows; ++r) io::fill_window(b, r, in.heldout, offsets[first + r], in.bos);
    m.forward(b.inputs.data(), b.targets.data(), rows, length);
    const float* losses = m.token_losses();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t t = 0; t < length; ++t) {
        const double l = losses[r * length + t];
        const int64_t k = t * buckets / length;
        bucket_loss[k] += l;
        bucket_n[k] += 1;
        if (t < train_len) {
          within += l;
          within_n += 1;
        } else {
          beyond += l;
          beyond_n += 1;
        }
      }
  }
  json bj = json::array();
  double total = 0, total_n = 0;
  for (int64_t k = 0; k < buckets; ++k) {
    const double loss = bucket_loss[k] / bucket_n[k];
    bj.push_back(json{{"start", k * length / buckets},
                      {"end", (k + 1) * length / buckets},
                      {"loss", loss},
                      {"ppl", std::exp(loss)}});
    total += bucket_loss[k];
    total_n += bucket_n[k];
  }
  const double loss = total / total_n;
  return json{{"windows", offsets.size()},
              {"tokens", static_cast<int64_t>(total_n)},
              {"loss", loss},
              {"ppl", std::exp(loss)},
              {"loss_within_train_len", within_n > 0 ? json(within / within_n) : json(nullptr)},
              {"loss_beyond_train_len", beyond_n > 0 ? json(beyond / beyond_n) : json(nullptr)},
              {"buckets", bj}};
}

json retrieval(model::Model<float>& m, const LongctxInput& in, const LongctxOptions& o, const Filler& filler,
               TaskKind kind, int64_t length) {
  const int64_t need = task_min_length(kind, *in.tokenizer, o.shape);
  if (length < need)
    return json{{"skipped", cat("a length of ", length, " tokens is too short: the task's text needs about ", need)}};
  // The examples: sample k at depth (k mod depths) / (depths - 1), each from its own stream.
  std::vector<TaskExample> examples;
  for (int64_t k = 0; k < o.samples; ++k) {
    const int64_t d = k % o.depths;
    const double depth = o.depths == 1 ? 0.5 : static_cast<double>(d) / static_cast<double>(o.depths - 1);
    Rng rng(Rng::derive(o.seed, cat("longctx/", to_string(kind), "/", length, "/", k)));
    try {
      examples.push_back(make_task_example(kind, *in.tokenizer, filler, length, depth, rng, o.shape));
    } catch (const Error& e) {  // this draw's keys need more tokens than task_min_length saw
      return json{{"skipped", e.what()}};
    }
  }
  RetrievalTally all;
  std::map<double, RetrievalTally> by_depth;
  const int64_t batch = std::max<int64_t>(1, o.batch_tokens / length);
  const int64_t vocab = in.config.vocab_size;
  for (size_t first = 0; first < examples.size(); first += batch) {
    const int64_t rows = std::min<int64_t>(batch, static_cast<int64_t>(examples.size() - first));
    std::vector<int32_t> tokens;
    tokens.reserve(rows * length);
    for (int64_t r = 0; r < rows; ++r)
      tokens.insert(tokens.end(), examples[first + r].tokens.begin(), examples[first + r].tokens.end());
    m.forward(tokens.data(), nullptr, rows, length);
    for (int64_t r = 0; r < rows; ++r) {
      const TaskExample& ex = examples[first + r];
      const float* logits = m.logits() + r * length * vocab;
      RetrievalTally& at = by_depth[ex.depth];
      ++all.samples;
      ++at.samples;
      for (const AnswerSpan& span : ex.answers) {
        const AnswerScore s = score_answer(logits, vocab, ex.tokens, span);
        all.add(s);
        at.add(s);
      }
    }
  }
  json j = all.to_json();
  json depths = json::array();
  for (const auto& [depth, tally] : by_depth) {
    json d = tally.to_json();
    d["depth"] = depth;
    depths.push_back(d);
  }
  j["by_depth"] = depths;
  j["example_text"] = in.tokenizer->decode(examples.front().tokens);  // first example, for a look
  return j;
}

}  // namespace

void RetrievalTally::add(const AnswerScore& s) {
  ++values;
  recovered += s.recovered();
  tokens += s.tokens;
  correct += s.correct;
  logprob += s.logprob;
}

json RetrievalTally::to_json() const {
  auto ratio = [](double a, double b) { return b > 0 ? json(a / b) : json(nullptr); };
  return json{{"samples", samples},
              {"values", values},
              {"score", ratio(static_cast<double>(recovered), static_cast<double>(values))},
              {"digit_accuracy", ratio(static_cast<double>(correct), static_cast<double>(tokens))},
              {"mean_logprob", ratio(logprob, static_cast<double>(values))},
              {"mean_token_logprob", ratio(logprob, static_cast<double>(tokens))}};
}

model::ModelConfig config_for_length(const model::ModelConfig& checkpoint, const RopeOverride& rope, int64_t length) {
  model::ModelConfig c = checkpoint;
  if (rope.rope_base) {
    if (!(*rope.rope_base > 1.0)) fail("--rope-base must be greater than 1, got ", *rope.rope_base);
    c.rope_base = *rope.rope_base;
  }
  if (c.rope_scaling.original_max_seq_len <= 0) c.rope_scaling.original_max_seq_len = checkpoint.max_seq_len;
  if (rope.original_len) {
    if (*rope.original_len < 1) fail("--original-len must be positive, got ", *rope.original_len);
    c.rope_scaling.original_max_seq_len = *rope.original_len;
  }
  if (rope.type) c.rope_scaling.type = *rope.type;
  if (c.rope_scaling.type == model::RopeScalingType::none) {
    if (rope.factor && *rope.factor != 1.0)
      fail("--factor ", *rope.factor, " needs a scaling: give --rope-scaling linear|ntk|yarn");
    c.rope_scaling.factor = 1.0;
  } else if (rope.factor) {
    if (!(*rope.factor >= 1.0)) fail("--factor must be at least 1, got ", *rope.factor);
    c.rope_scaling.factor = *rope.factor;
  } else if (rope.type) {  // a scaling chosen here, no factor: stretch the original length to this one
    c.rope_scaling.factor =
        std::max(1.0, static_cast<double>(length) / static_cast<double>(c.rope_scaling.original_max_seq_len));
  }
  try {
    c.validate();
  } catch (const Error& e) {
    fail("the RoPE settings for length ", length, " are invalid: ", e.what());
  }
  return c;
}

void check_lengths(const std::vector<int64_t>& lengths, const std::string& flag) {
  if (lengths.empty()) fail(flag, ": no lengths given (e.g. 256,512,1024)");
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] < 2) fail(flag, ": ", lengths[i], " is not a length (a whole number of tokens, at least 2)");
    if (std::find(lengths.begin(), lengths.begin() + i, lengths[i]) != lengths.begin() + i)
      fail(flag, ": length ", lengths[i], " is given twice");
  }
}

json run_longctx(const LongctxInput& in, const LongctxOptions& o, const std::function<void(const std::string&)>& log) {
  if (!in.params || !in.tokenizer) fail("longctx: no model or tokenizer");
  if (o.samples < 0) fail("--samples must not be negative, got ", o.samples);
  if (o.depths < 1) fail("--depths must be at least 1, got ", o.depths);
  if (o.buckets < 1) fail("--buckets must be at least 1, got ", o.buckets);
  if (o.ppl_windows < 1) fail("--ppl-windows must be at least 1, got ", o.ppl_windows);
  if (in.tokenizer->vocab_size() > in.config.vocab_size)
    fail("the tokenizer has ", in.tokenizer->vocab_size(), " ids, more than the model's vocab_size ",
         in.config.vocab_size);
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t train_len = o.train_len > 0 ? o.train_len : in.config.max_seq_len;
  const Filler filler = o.heldout_filler ? Filler::from_stream(in.heldout, in.bos, in.eos)
                                         : Filler::neutral(*in.tokenizer);
  json lengths = json::array();
  for (int64_t length : o.lengths) {
    const auto tl = std::chrono::steady_clock::now();
    const model::ModelConfig c = config_for_length(in.config, o.rope, length);
    model::Model<float> m(c);
    m.load_params(*in.params);
    json entry{{"length", length}, {"rope", rope_json(c)}};
    if (o.perplexity) {
      entry["perplexity"] = position_perplexity(m, in, o, length, train_len);
      if (log && entry["perplexity"].contains("loss"))
        log(cat("length ", length, ": perplexity ", entry["perplexity"]["ppl"].get<double>()));
    }
    json tasks = json::object();
    if (o.samples > 0)
      for (TaskKind kind : o.tasks) {
        tasks[to_string(kind)] = retrieval(m, in, o, filler, kind, length);
        if (log && tasks[to_string(kind)].contains("score"))
          log(cat("length ", length, ": ", to_string(kind), " score ", tasks[to_string(kind)]["score"].dump(),
                  " digit accuracy ", tasks[to_string(kind)]["digit_accuracy"].dump()));
      }
    entry["tasks"] = tasks;
    entry["elapsed_s"] = seconds_since(tl);
    lengths.push_back(entry);
  }
  json tasks = json::array();
  for (TaskKind k : o.tasks) tasks.push_back(to_string(k));
  return json{{"train_len", train_len},
              {"samples", o.samples},
              {"depths", o.depths},
              {"seed", o.seed},
              {"filler", o.heldout_filler ? "heldout" : "neutral"},
              {"tasks", tasks},
              {"task_shape",
               {{"multikey_distractors", o.shape.multikey_distractors},
                {"multivalue_values", o.shape.multivalue_values}}},
              {"lengths", lengths},
              {"elapsed_s", seconds_since(t0)}};
}

}  // namespace gatedlm::eval
