// Model.forward (logits and captured tensors), Model.score and Model.analyze: the model's
// own forward, eval::score_sequences (`gatedlm score`) and analysis::analyze_stream
// (`gatedlm analyze`).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <set>

#include "analysis/analyze.h"
#include "common.h"
#include "hooks.h"
#include "eval/score.h"

namespace gatedlm::python {

namespace {

const std::set<std::string> kCaptures{"attention", "gate_scores", "pre_gate", "post_gate",
                                      "sdpa_out",  "hidden_states", "moe_routing"};

// A new float32 array of `shape` (batch axis dropped when the ids were 1-D).
py::array_t<float> new_array(std::vector<int64_t> shape, bool two_dims) {
  if (!two_dims) shape.erase(shape.begin());
  return py::array_t<float>(shape);
}

// Query rows [start, stop) of the attention maps (keys 0..stop-1).
struct Window {
  int64_t start = 0, stop = 0;
};
Window attention_window(const py::object& w, int64_t seq) {
  Window out{0, seq};
  if (w.is_none()) return out;
  if (py::isinstance<py::int_>(w)) {
    out.stop = w.cast<int64_t>();
  } else {
    const auto pair = w.cast<std::pair<int64_t, int64_t>>();
    out = {pair.first, pair.second};
  }
  if (out.start < 0 || out.stop > seq || out.start >= out.stop)
    throw py::value_error(cat("attention_window: positions [", out.start, ", ", out.stop,
                              ") are not a non-empty range inside the sequence of ", seq, " tokens"));
  return out;
}

// One capture's [batch, layers, seq, width] rows of a per-layer probe tensor; NaN for a layer
// that has no such tensor (a hybrid's linear-attention layers have no SDPA, gate or attention).
template <typename Get>
py::array_t<float> layer_rows(const model::Model<float>& m, const TokenBatch& b, int64_t width, Get&& get) {
  const int64_t L = m.config().n_layers, B = b.batch, T = b.seq;
  py::array_t<float> out = new_array({B, L, T, width}, b.two_dims);
  float* dst = out.mutable_data();
  ReleaseGil release;
  for (int64_t l = 0; l < L; ++l) {
    const float* src = get(m.probe(l));
    for (int64_t r = 0; r < B; ++r) {
      float* rows = dst + (r * L + l) * T * width;
      if (src)
        std::memcpy(rows, src + r * T * width, sizeof(float) * T * width);
      else
        std::fill_n(rows, T * width, std::numeric_limits<float>::quiet_NaN());
    }
  }
  return out;
}

py::array_t<float> attention_capture(const model::Model<float>& m, const TokenBatch& b, const Window& w) {
  const model::ModelConfig& c = m.config();
  const int64_t L = c.n_layers, H = c.n_heads, S = b.seq, R = w.stop - w.start, K = w.stop;
  const double bytes = 4.0 * b.batch * L * H * R * K + 4.0 * H * S * S;
  if (bytes > 8.0 * (int64_t{1} << 30))
    throw py::value_error(cat("capture attention: ", bytes / (1 << 30), " GiB of probabilities; give a smaller "
                              "attention_window=(start, stop)"));
  py::array_t<float> out = new_array({b.batch, L, H, R, K}, b.two_dims);
  float* dst = out.mutable_data();
  ReleaseGil release;
  std::vector<float> probs(static_cast<size_t>(H * S * S));
  for (int64_t r = 0; r < b.batch; ++r)
    for (int64_t l = 0; l < L; ++l) {
      if (!m.attention_probs(probs.data(), l, r)) {  // a kind without softmax (Gated DeltaNet): NaN
        std::fill_n(dst + (r * L + l) * H * R * K, H * R * K, std::numeric_limits<float>::quiet_NaN());
        continue;
      }
      for (int64_t h = 0; h < H; ++h)
        for (int64_t t = 0; t < R; ++t)
          std::memcpy(dst + (((r * L + l) * H + h) * R + t) * K, probs.data() + (h * S + w.start + t) * S,
                      sizeof(float) * K);
    }
  return out;
}

// {"layers": [MoE layer indices], "experts": int32 [batch, moe layers, seq, top_k]}.
py::dict moe_capture(const model::Model<float>& m, const TokenBatch& b) {
  std::vector<int64_t> layers;
  for (int64_t l = 0; l < m.config().n_layers; ++l)
    if (m.moe_block(l)) layers.push_back(l);
  if (layers.empty()) throw py::value_error("capture moe_routing: the model has no mixture-of-experts layer");
  const int64_t k = m.config().moe.top_k, B = b.batch, T = b.seq, M = static_cast<int64_t>(layers.size());
  std::vector<int64_t> shape{B, M, T, k};
  if (!b.two_dims) shape.erase(shape.begin());
  py::array_t<int32_t> experts(shape);
  int32_t* dst = experts.mutable_data();
  for (int64_t i = 0; i < M; ++i) {
    const std::span<const int32_t> chosen = m.moe_block(layers[i])->chosen();
    for (int64_t r = 0; r < B; ++r)
      std::memcpy(dst + (r * M + i) * T * k, chosen.data() + r * T * k, sizeof(int32_t) * T * k);
  }
  py::dict out;
  out["layers"] = layers;
  out["experts"] = experts;
  return out;
}

void require_gate(const model::ModelConfig& c, const std::string& name) {
  if (!c.has_gate()) throw py::value_error(cat("capture ", name, ": the model has no attention gate"));
}

py::dict forward(const PyModel& self, const py::handle& ids, const std::vector<std::string>& capture,
                 const py::object& window_arg) {
  const std::shared_ptr<ModelHandle> h = self.handle();
  model::Model<float>& m = h->model;
  const model::ModelConfig& c = m.config();
  for (const std::string& name : capture)
    if (!kCaptures.count(name))
      throw py::value_error(cat("capture: unknown name \"", name, "\" (attention, gate_scores, pre_gate, post_gate, "
                                "sdpa_out, hidden_states, moe_routing)"));
  const TokenBatch b = token_batch(ids, c.vocab_size, "Model.forward");
  if (b.seq > c.max_seq_len)
    throw py::value_error(cat("Model.forward: ", b.seq, " tokens per sequence exceed the model's max_seq_len ",
                              c.max_seq_len));
  const Window window = attention_window(window_arg, b.seq);
  const std::set<std::string> wanted(capture.begin(), capture.end());
  if (wanted.count("gate_scores") || wanted.count("pre_gate") || wanted.count("post_gate")) require_gate(c, "gate_*");
  py::array_t<float> logits = new_array({b.batch, b.seq, c.vocab_size}, b.two_dims);
  std::unique_lock lock(h->mutex, std::defer_lock);
  {
    ReleaseGil release;
    lock.lock();
    m.forward(b.ids.data(), nullptr, b.batch, b.seq);
    std::memcpy(logits.mutable_data(), m.logits(), sizeof(float) * b.batch * b.seq * c.vocab_size);
  }
  py::dict out;
  out["logits"] = logits;
  const int64_t gate_width = c.has_gate() ? c.gate_target_heads() * c.gate_target_head_dim() : 0;
  using Probe = model::BlockProbe<float>;
  if (wanted.count("hidden_states"))
    out["hidden_states"] = layer_rows(m, b, c.d_model, [](const Probe& p) { return p.resid_out; });
  if (wanted.count("sdpa_out"))
    out["sdpa_out"] = layer_rows(m, b, c.q_dim(), [](const Probe& p) { return p.sdpa_out; });
  if (wanted.count("gate_scores"))
    out["gate_scores"] = layer_rows(m, b, gate_width, [](const Probe& p) { return p.gate_score; });
  if (wanted.count("pre_gate")) out["pre_gate"] = layer_rows(m, b, gate_width, [](const Probe& p) { return p.gate_y; });
  if (wanted.count("post_gate"))
    out["post_gate"] = layer_rows(m, b, gate_width, [](const Probe& p) { return p.gate_y_out; });
  if (wanted.count("attention")) out["attention"] = attention_capture(m, b, window);
  if (wanted.count("moe_routing")) out["moe_routing"] = moe_capture(m, b);
  return out;
}

py::dict score(const PyModel& self, const py::handle& ids, const py::object& hooks) {
  const std::shared_ptr<ModelHandle> h = self.handle();
  const model::ModelConfig& c = h->model.config();
  PyHooks py_hooks(c, hooks);
  const auto sequences = token_sequences(ids, c.vocab_size, "Model.score");
  for (const auto& s : sequences)
    if (static_cast<int64_t>(s.size()) < 2 || static_cast<int64_t>(s.size()) > c.max_seq_len)
      throw py::value_error(cat("Model.score: a sequence of ", s.size(), " tokens; each needs 2 to max_seq_len ",
                                c.max_seq_len));
  eval::ScoreResult r;
  {
    ReleaseGil release;
    const std::lock_guard lock(h->mutex);
    const HooksScope scope(*h, &py_hooks);
    r = eval::score_sequences(h->model, sequences, "the ids given", self.source().empty() ? "(in memory)" : self.source());
  }
  py::dict out;
  out["tokens"] = r.tokens;
  out["mean_loss"] = r.mean_loss;
  out["logprobs"] = r.logprobs;
  return out;
}

py::object analyze(const PyModel& self, const py::handle& text_or_ids, const py::object& tokenizer_arg,
                   int64_t sequences, int64_t seq_len, uint64_t seed, const std::vector<int64_t>& map_layers,
                   int64_t map_size, bool include_token_ids) {
  const std::shared_ptr<ModelHandle> h = self.handle();
  const model::ModelConfig& c = h->model.config();
  if (sequences < 1) throw py::value_error("analyze: sequences must be at least 1");
  if (map_size < 1 || map_size > 64) throw py::value_error("analyze: map_size must be in 1..64");
  std::shared_ptr<io::Tokenizer> tok = tokenizer_arg.is_none() ? self.tokenizer : tokenizer_from(tokenizer_arg);
  if (!tok) throw py::value_error("analyze: give tokenizer= (its BOS starts each window), or load the model with one");
  if (tok->vocab_size() > c.vocab_size)
    fail(tok->name(), ": the tokenizer has ", tok->vocab_size(), " ids, more than the model's vocab_size ", c.vocab_size);
  std::vector<int32_t> stream;
  nlohmann::json record;
  if (py::isinstance<py::str>(text_or_ids)) {
    stream = tok->encode(text_or_ids.cast<std::string>());
    record = {{"kind", "text"}, {"file", nullptr}};
  } else {
    const TokenBatch b = token_batch(text_or_ids, c.vocab_size, "Model.analyze");
    if (b.two_dims) throw py::value_error("Model.analyze: give one 1-D stream of ids (windows are cut from it)");
    stream = b.ids;
    record = {{"kind", "ids"}};
  }
  record["tokenizer"] = tok->name();
  record["stream_tokens"] = stream.size();
  analysis::AnalyzeOptions ao;
  ao.map_layers = map_layers;
  ao.map_size = map_size;
  ao.include_token_ids = include_token_ids;
  ao.checkpoint = self.source();
  ao.source = record;
  ao.seed = seed;
  nlohmann::json j;
  {
    ReleaseGil release;
    const std::lock_guard lock(h->mutex);
    const int64_t len = analysis::analysis_window_length(seq_len, c.max_seq_len);
    j = analysis::analyze_stream(h->model, stream, tok->bos_id(), sequences, len, ao);
  }
  return to_python(j);
}

}  // namespace

void bind_forward(py::class_<PyModel>& cls) {
  cls.def("forward", &forward, py::arg("ids"), py::arg("capture") = std::vector<std::string>{},
          py::arg("attention_window") = py::none(),
          R"(Runs the model on token ids: [seq] or a batch [batch, seq] of equal-length sequences
(a list or an integer NumPy array, C-contiguous, ids in 0..vocab_size-1).

Returns a dict with "logits" (float32 [batch, seq, vocab]; no batch axis for 1-D ids) and
each tensor named in `capture`, per layer, copied out of this forward:
  "attention"     [batch, layers, heads, rows, keys]: softmax probabilities of the query rows
                  of attention_window (int stop, or (start, stop); default all), keys 0..stop-1
  "gate_scores"   [batch, layers, seq, width]: the effective gate score per element
  "pre_gate"      [batch, layers, seq, width]: the gated tensor before the gate (G1: SDPA output Y)
  "post_gate"     [batch, layers, seq, width]: after the gate (G1: Y * score)
  "sdpa_out"      [batch, layers, seq, heads*head_dim]: SDPA output (after sdpa_transform)
  "hidden_states" [batch, layers, seq, d_model]: the residual stream after each block
  "moe_routing"   {"layers": [...], "experts": int32 [batch, moe layers, seq, top_k]}
A hybrid model's linear-attention layers have no attention, SDPA output or gate: their
entries in those captures are NaN.
)")
      .def("score", &score, py::arg("ids"), py::arg("hooks") = py::none(),
           R"(Next-token cross-entropy, as `gatedlm score --json --logprobs`: each sequence on its own
(a 1-D sequence, a 2-D array, or a list of sequences of any lengths >= 2). Returns
{"tokens", "mean_loss" (nats), "logprobs" (per sequence, log p of each next token)}.
hooks: {name: fn} as in run_with_hooks, acting in every forward of the scoring.)")
      .def("analyze", &analyze, py::arg("text_or_ids"), py::arg("tokenizer") = py::none(), py::kw_only(),
           py::arg("sequences") = 16, py::arg("seq_len") = 0, py::arg("seed") = 0,
           py::arg("map_layers") = std::vector<int64_t>{}, py::arg("map_size") = 64,
           py::arg("include_token_ids") = true,
           R"(The probes of `gatedlm analyze` (attention sink, massive activations, gate statistics,
expert load) over `sequences` windows of seq_len tokens (0: min(256, max_seq_len)), each BOS +
consecutive ids from a seeded offset of the stream: a text (encoded with `tokenizer`) or a 1-D
id stream. Returns the same dict as the JSON `gatedlm analyze --text FILE` writes, except
"source" (kind "text" or "ids", no file) and "checkpoint".)");
}

}  // namespace gatedlm::python
