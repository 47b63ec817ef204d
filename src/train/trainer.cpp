#include "train/trainer.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/progress.h"
#include "eval/evaluate.h"
#include "io/checkpoint.h"
#include "io/token_dataset.h"
#include "kernels/bf16_support.h"
#include "model/init.h"
#include "model/model.h"
#include "train/batches.h"
#include "train/optimizer.h"
#include "train/run_dir.h"
#include "train/spikes.h"

namespace gatedlm::train {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void on_interrupt(int) { g_interrupted = true; }

// Hyper-parameters a resumed run may change: the budget and the bookkeeping cadence.
bool may_change_on_resume(const std::string& key) {
  return key == "steps" || key == "tokens" || key == "minutes" || key == "eval_every" || key == "save_every" ||
         key == "keep_checkpoints" || key == "eval_tokens";
}

json read_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in) fail(path.string(), ": missing");
  try {
    return json::parse(in);
  } catch (const json::parse_error& e) {
    fail(path.string(), ": not valid JSON (", e.what(), ")");
  }
}

// Keeps the records of steps <= last_step (those the checkpoint has seen).
void truncate_metrics(const fs::path& path, int64_t last_step) {
  if (!fs::exists(path)) return;
  std::ifstream in(path);
  std::string line, kept;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    try {
      if (json::parse(line).value("step", int64_t{0}) <= last_step) kept += line + "\n";
    } catch (const json::parse_error&) {
      break;  // a line cut by a crash: drop it and everything after
    }
  }
  write_file_atomic(path.string(), kept);
}

double global_norm(std::span<const float> g) {
  double s = 0.0;
  for (float x : g) s += static_cast<double>(x) * static_cast<double>(x);
  return std::sqrt(s);
}

void scale(std::span<float> g, float factor) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < g.size(); ++i) g[i] *= factor;
}

struct RunSetup {
  model::ModelConfig model;
  TrainConfig config;
  std::string data;
  std::vector<float> params, adam_m, adam_v;
  TrainingState state;
};

RunSetup setup_new_run(const TrainRequest& req) {
  const fs::path run(req.out);
  if (fs::exists(run) && !(fs::is_directory(run) && fs::is_empty(run)))
    fail(req.out, ": already exists and is not empty (continue it with --resume ", req.out,
         ", or choose another --out)");
  if (req.data.empty()) fail("train: --data DIR is required for a new run");
  RunSetup s;
  s.config = req.config;
  s.config.validate();
  s.data = req.data;
  if (!req.init_from.empty()) {
    io::Checkpoint init = io::load_checkpoint(req.init_from);
    s.model = req.model_config.empty() ? init.config : model::load_config(req.model_config);
    const model::ParamLayout want(s.model), have(init.config);
    if (want.total() != have.total())
      fail("--init-from ", req.init_from, ": its weights (", have.total(), " parameters) do not fit the model config (",
           want.total(), ")");
    for (size_t i = 0; i < want.specs().size(); ++i)
      if (want.specs()[i].name != have.specs()[i].name || want.specs()[i].shape != have.specs()[i].shape)
        fail("--init-from ", req.init_from, ": tensor ", have.specs()[i].name, " does not match the model config");
    s.params = std::move(init.params);
  } else {
    if (req.model_config.empty()) fail("train: --config MODEL.json is required for a new run");
    s.model = model::load_config(req.model_config);
    model::init_params(s.params, model::ParamLayout(s.model), s.model, s.config.seed);
  }
  s.adam_m.assign(s.params.size(), 0.0f);
  s.adam_v.assign(s.params.size(), 0.0f);
  s.state.planned_steps = s.config.planned_steps();
  fs::create_directories(run);
  write_file_atomic((run / "config.json").string(), model::config_to_json(s.model).dump(2) + "\n");
  write_file_atomic((run / "train_config.json").string(), train_config_to_json(s.config).dump(2) + "\n");
  json info{{"data", fs::absolute(req.data).string()}, {"init_from", req.init_from}};
  write_file_atomic((run / "run.json").string(), info.dump(2) + "\n");
  return s;
}

RunSetup setup_resume(const TrainRequest& req) {
  const fs::path run(req.out);
  if (!fs::exists(run / "latest"))
    fail(req.out, ": no checkpoint to resume from (", (run / "latest").string(), " is missing)");
  RunSetup s;
  s.config = train_config_from_json(read_json(run / "train_config.json"), (run / "train_config.json").string());
  const json saved = train_config_to_json(s.config), given = train_config_to_json(req.config);
  json merged = saved;
  for (const std::string& key : req.explicit_flags) {
    if (!given.contains(key) || given[key] == saved[key]) continue;
    if (!may_change_on_resume(key))
      fail("--resume ", req.out, ": the run was started with ", key, " = ", saved[key].dump(),
           "; it cannot change to ", given[key].dump(), " (only the budget and the eval/save cadence can)");
    merged[key] = given[key];
  }
  s.config = train_config_from_json(merged, "resume");
  s.config.validate();
  TrainingCheckpoint ck = load_training_checkpoint(req.out);
  if (!req.model_config.empty() &&
      model::config_to_json(model::load_config(req.model_config)) != model::config_to_json(ck.config))
    fail("--resume ", req.out, ": ", req.model_config, " differs from the run's model config (",
         (run / "config.json").string(), ")");
  s.model = ck.config;
  s.data = req.data.empty() ? read_json(run / "run.json").at("data").get<std::string>() : req.data;
  s.params = std::move(ck.params);
  s.adam_m = std::move(ck.adam_m);
  s.adam_v = std::move(ck.adam_v);
  s.state = ck.state;
  if (merged != saved) {  // a new budget: re-plan and record it
    s.state.planned_steps = std::max(s.config.planned_steps(), s.state.step);
    write_file_atomic((run / "train_config.json").string(), train_config_to_json(s.config).dump(2) + "\n");
  }
  truncate_metrics(run / "metrics.jsonl", s.state.step);
  return s;
}

}  // namespace

TrainOutcome run_training(const TrainRequest& req) {
  RunSetup s = req.resume ? setup_resume(req) : setup_new_run(req);
  const fs::path run(req.out);
  const TrainConfig& tc = s.config;
  const io::TokenDataset data = io::TokenDataset::open(s.data);
  const io::DatasetManifest& mf = data.manifest();
  if (mf.vocab_size > s.model.vocab_size)
    fail("the data in ", s.data, " uses a tokenizer of ", mf.vocab_size, " ids (", mf.tokenizer,
         "), more than the model's vocab_size ", s.model.vocab_size);
  const std::vector<int32_t> train_stream = data.load_split("train");
  const std::vector<int32_t> val_stream = data.load_split("val");
  if (static_cast<int64_t>(train_stream.size()) < tc.seq_len + 1)
    fail(s.data, ": the training split has ", train_stream.size(), " tokens, fewer than one sequence of ",
         tc.seq_len, " (lower --seq-len)");
  const double val_bytes_per_token =
      mf.val.tokens > 0 ? static_cast<double>(mf.val.bytes) / static_cast<double>(mf.val.tokens) : 1.0;

  model::Model<float> model(s.model);
  model.load_params(s.params);
  model.set_bf16_matmuls(tc.precision == "bf16");
  if (tc.precision == "bf16") {
    // Said once, before the first step: without bf16 units the products are emulated.
    const std::string warning = kernels::bf16_emulation_warning("--precision bf16");
    if (!warning.empty()) std::fprintf(stderr, "%s\n", warning.c_str());
  }
  AdamW<float> optimizer(model.layout(), AdamWConfig{tc.beta1, tc.beta2, tc.eps, tc.weight_decay});
  optimizer.m() = s.adam_m;
  optimizer.v() = s.adam_v;
  optimizer.set_steps_taken(s.state.step);
  SpikeDetector spikes(tc.spike_window, tc.spike_margin, tc.warmup);
  spikes.restore({s.state.loss_history.begin(), s.state.loss_history.end()}, s.state.spike_steps);
  TrainingState& state = s.state;

  std::ofstream metrics(run / "metrics.jsonl", std::ios::app);
  if (!metrics) fail((run / "metrics.jsonl").string(), ": cannot write");
  auto record = [&](const json& j) { metrics << j.dump() << "\n" << std::flush; };

  const auto segment_start = std::chrono::steady_clock::now();
  const double elapsed_before = state.elapsed_s;
  auto elapsed = [&] {
    return elapsed_before + std::chrono::duration<double>(std::chrono::steady_clock::now() - segment_start).count();
  };
  double train_seconds = 0.0;  // time in training steps (not evaluation or saving), this segment
  int64_t trained_tokens = 0;

  auto save = [&] {
    state.elapsed_s = elapsed();
    state.loss_history.assign(spikes.history().begin(), spikes.history().end());
    state.spike_steps = spikes.spike_steps();
    std::vector<float> params(model.params().begin(), model.params().end());
    save_training_checkpoint(req.out, s.model, params, optimizer.m(), optimizer.v(), state, tc.keep_checkpoints);
  };
  json last_eval;
  auto evaluate = [&] {
    eval::EvalResult r = eval::evaluate(model, val_stream, mf.bos_id, tc.seq_len, tc.eval_tokens, tc.batch_size,
                                        val_bytes_per_token);
    last_eval = {{"step", state.step}, {"val_loss", r.loss}, {"val_ppl", r.ppl}, {"val_bpb", r.bpb},
                 {"val_tokens", r.tokens}};
    record(last_eval);
    return r;
  };
  auto summary = [&](const std::string& outcome) {
    json j{{"outcome", outcome},
           {"steps", state.step},
           {"tokens_seen", state.tokens_seen},
           {"params", model.layout().total()},
           {"spikes", {{"count", spikes.spike_steps().size()}, {"steps", spikes.spike_steps()}}},
           {"tokens_per_s", train_seconds > 0 ? static_cast<double>(trained_tokens) / train_seconds : 0.0},
           {"elapsed_s", elapsed()},
           {"final_train_loss", spikes.history().empty() ? json(nullptr) : json(spikes.history().back())}};
    for (const char* key : {"val_loss", "val_ppl", "val_bpb"})
      j[key] = last_eval.contains(key) ? last_eval[key] : json(nullptr);
    write_file_atomic((run / "summary.json").string(), j.dump(2) + "\n");
  };

  g_interrupted = false;
  auto previous_int = std::signal(SIGINT, on_interrupt);
  auto previous_term = std::signal(SIGTERM, on_interrupt);
  struct RestoreSignals {
    decltype(previous_int) a, b;
    ~RestoreSignals() {
      std::signal(SIGINT, a);
      std::signal(SIGTERM, b);
    }
  } restore{previous_int, previous_term};

  std::fprintf(stderr, "%s %s: %lld parameters, %lld tokens/step, %s\n", req.resume ? "resuming" : "training",
               req.out.c_str(), static_cast<long long>(model.layout().total()),
               static_cast<long long>(tc.tokens_per_step()),
               state.planned_steps ? cat(state.planned_steps, " steps planned").c_str()
                                   : cat(tc.minutes, " minutes").c_str());
  Progress progress("train", std::max<int64_t>(state.planned_steps, 1));
  bool saved_at_step = false, evaluated_at_step = false;
  while (state.planned_steps == 0 || state.step < state.planned_steps) {
    if (tc.minutes > 0 && elapsed() >= tc.minutes * 60.0) break;
    const auto t0 = std::chrono::steady_clock::now();
    model.zero_grads();
    double loss = 0.0;
    for (int64_t micro = 0; micro < tc.grad_accum; ++micro) {
      Batch b = training_batch(train_stream, tc.batch_size, tc.seq_len, mf.bos_id, tc.seed, state.step, micro);
      loss += model.forward(b.inputs.data(), b.targets.data(), b.batch, b.seq);
      model.backward();
    }
    loss /= static_cast<double>(tc.grad_accum);
    if (tc.grad_accum > 1) scale(model.grads(), 1.0f / static_cast<float>(tc.grad_accum));
    const double norm = global_norm(model.grads());
    if (!std::isfinite(loss) || !std::isfinite(norm)) {
      summary("non-finite");
      fail("step ", state.step + 1, ": the ", std::isfinite(loss) ? "gradient norm" : "loss", " is ",
           std::isfinite(loss) ? norm : loss, ". Training stopped; the last good checkpoint is kept (",
           fs::exists(run / "latest") ? "resume with --resume " + req.out : "none was saved yet",
           "). A lower --lr or a --clip may help.");
    }
    if (tc.clip > 0 && norm > tc.clip) scale(model.grads(), static_cast<float>(tc.clip / (norm + 1e-6)));
    const double lr = learning_rate(tc, state.step, std::max<int64_t>(state.planned_steps, state.step + 1));
    optimizer.step(model.params(), model.grads(), lr);
    const double step_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    train_seconds += step_s;
    trained_tokens += tc.tokens_per_step();
    state.step += 1;
    state.tokens_seen += tc.tokens_per_step();
    const bool spike = spikes.observe(state.step, loss);
    const double tps = static_cast<double>(tc.tokens_per_step()) / step_s;
    json rec{{"step", state.step}, {"lr", lr},          {"loss", loss},
             {"grad_norm", norm},  {"tokens_per_s", tps}, {"elapsed_s", elapsed()}};
    if (spike) rec["spike"] = true;
    record(rec);
    // A minutes-only budget fixes its step count after a few steps, from their speed.
    if (state.planned_steps == 0 && state.step == 3)
      state.planned_steps = std::max<int64_t>(4, static_cast<int64_t>(tc.minutes * 60.0 / (elapsed() / 3.0)));
    evaluated_at_step = saved_at_step = false;
    if (tc.eval_every > 0 && state.step % tc.eval_every == 0) {
      evaluate();
      evaluated_at_step = true;
    }
    if (tc.save_every > 0 && state.step % tc.save_every == 0) {
      save();
      saved_at_step = true;
    }
    progress.update(state.step, cat("loss ", std::to_string(loss).substr(0, 6), "  ",
                                    static_cast<int64_t>(tps), " tok/s"));
    if (g_interrupted) {
      std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C stops at once
      if (!saved_at_step) save();
      summary("interrupted");
      std::fprintf(stderr, "\ninterrupted at step %lld: checkpoint saved; continue with gatedlm train --resume %s\n",
                   static_cast<long long>(state.step), req.out.c_str());
      return TrainOutcome::interrupted;
    }
  }
  progress.finish(cat("step ", state.step));
  if (!evaluated_at_step) evaluate();
  if (!saved_at_step) save();
  summary("completed");
  std::fprintf(stderr, "done: %lld steps, val_loss %.4f, val_bpb %.4f, %zu loss spikes\n",
               static_cast<long long>(state.step), last_eval["val_loss"].get<double>(),
               last_eval["val_bpb"].get<double>(), spikes.spike_steps().size());
  return TrainOutcome::completed;
}

}  // namespace gatedlm::train
