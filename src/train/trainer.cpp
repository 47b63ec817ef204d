#include "train/trainer.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <omp.h>
#include <optional>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_file.h"
#include "core/memory.h"
#include "core/progress.h"
#include "dist/collectives.h"
#include "dist/gradient_sum.h"
#include "eval/evaluate.h"
#include "io/checkpoint.h"
#include "io/token_dataset.h"
#include "kernels/bf16_support.h"
#include "model/init.h"
#include "model/model.h"
#include "io/token_windows.h"
#include "train/data_parallel.h"
#include "train/metrics_log.h"
#include "train/moe_balance.h"
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
         key == "keep_checkpoints" || key == "eval_tokens" || key == "probe_every";
}

json read_json(const fs::path& path) { return read_json_file(path.string(), "run file"); }

// Whether metrics.jsonl holds the evaluation of `step` (one cut short by a signal is not
// recorded, and the resumed run does it first).
bool has_evaluation_record(const fs::path& path, int64_t step) {
  for (const json& record : read_metrics_log(path, IfMissing::empty).records)
    if (record.contains("val_loss") && record_step(record) == step) return true;
  return false;
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

// Weights, gradients and the two AdamW moments, plus a lower bound on one micro-batch's
// activations (logits and their gradient, and a few d_model/ffn-wide rows per layer).
void require_training_memory(const model::ModelConfig& m, const TrainConfig& c) {
  const uint64_t params = static_cast<uint64_t>(model::ParamLayout(m).total());
  const uint64_t rows = saturating_mul(static_cast<uint64_t>(c.batch_size), static_cast<uint64_t>(c.seq_len));
  const uint64_t per_row = saturating_add(
      saturating_mul(2, static_cast<uint64_t>(m.vocab_size)),
      saturating_mul(static_cast<uint64_t>(m.n_layers),
                     saturating_add(saturating_mul(8, static_cast<uint64_t>(m.d_model)),
                                    saturating_mul(3, static_cast<uint64_t>(m.ffn_hidden)))));
  // MoE layers keep per token k grouped rows (input, gate|up, SwiGLU, output) and E router values.
  const uint64_t moe_row = static_cast<uint64_t>(m.moe.moe_layers(m.n_layers)) *
                           (static_cast<uint64_t>(m.moe.top_k) * (2 * static_cast<uint64_t>(m.d_model) +
                                                                  3 * static_cast<uint64_t>(m.moe.expert_hidden)) +
                            3 * static_cast<uint64_t>(m.moe.n_experts));
  const uint64_t bytes = saturating_mul(
      4, saturating_add(saturating_mul(4, params), saturating_mul(rows, saturating_add(per_row, moe_row))));
  require_memory(cat("training this model with batch_size ", c.batch_size, " x seq_len ", c.seq_len), bytes,
                 "lower --batch-size or --seq-len (use --grad-accum for larger steps), or use a smaller model");
}

// Checks the run against its data before anything is written: the model's vocabulary and
// length, one training sequence and one evaluation window.
void check_against_data(const RunSetup& s, const io::DatasetManifest& mf, int64_t train_tokens, int64_t val_tokens) {
  const TrainConfig& tc = s.config;
  if (mf.vocab_size > s.model.vocab_size)
    fail("the data in ", s.data, " uses a tokenizer of ", mf.vocab_size, " ids (", mf.tokenizer,
         "), more than the model's vocab_size ", s.model.vocab_size);
  if (tc.seq_len > s.model.max_seq_len)
    fail("--seq-len ", tc.seq_len, " is above the model's max_seq_len ", s.model.max_seq_len,
         " (lower --seq-len, or raise max_seq_len in the model config)");
  if (train_tokens < tc.seq_len + 1)
    fail(s.data, ": the training split has ", train_tokens, " tokens, fewer than one sequence of ", tc.seq_len,
         " (lower --seq-len)");
  if (tc.eval_tokens > 0 && tc.eval_tokens < tc.seq_len)
    fail("--eval-tokens ", tc.eval_tokens, " is less than one evaluation window of --seq-len ", tc.seq_len,
         " tokens (give at least ", tc.seq_len, ", or 0 for the whole validation split)");
  if (val_tokens < tc.seq_len)
    fail(s.data, ": the validation split has ", val_tokens, " tokens, fewer than one evaluation window of --seq-len ",
         tc.seq_len, " (lower --seq-len, or prepare the data with a larger --val-fraction)");
}

// Everything a new run needs, checked before anything is written.
RunSetup plan_new_run(const TrainRequest& req) {
  const fs::path run(req.out);
  std::error_code ec;
  if (fs::exists(run, ec) && !fs::is_directory(run, ec))
    fail("--out ", req.out, ": exists and is a file, not a run directory (choose another --out)");
  if (fs::exists(run, ec) && !fs::is_empty(run, ec) && !is_unstarted_run(req.out))
    fail("--out ", req.out, ": already exists and is not empty (continue it with --resume ", req.out,
         ", or choose another --out)");
  if (req.data.empty()) fail("train: --data DIR is required for a new run");
  if (!fs::exists(run, ec)) {  // can it be created? (tried, and undone: it is made after all checks)
    fs::path first_new = fs::absolute(run);
    while (first_new.has_parent_path() && first_new.parent_path() != first_new &&
           !fs::exists(first_new.parent_path(), ec))
      first_new = first_new.parent_path();
    fs::create_directories(run, ec);
    if (ec) fail("--out ", req.out, ": cannot create the run directory (", ec.message(), ")");
    fs::remove_all(first_new, ec);
  }
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
    require_training_memory(s.model, s.config);
    model::init_params(s.params, model::ParamLayout(s.model), s.model, s.config.seed);
  }
  s.adam_m.assign(s.params.size(), 0.0f);
  s.adam_v.assign(s.params.size(), 0.0f);
  s.state.planned_steps = s.config.planned_steps();
  s.state.train_config = train_config_to_json(s.config);
  return s;
}

// Creates (or, when it never reached a checkpoint, clears) the run directory, locks it and
// writes its description. Returns whether the directory was created here.
bool create_run_dir(const TrainRequest& req, const RunSetup& s, std::optional<RunLock>& lock) {
  const fs::path run(req.out);
  std::error_code ec;
  const bool existed = fs::exists(run, ec);
  fs::create_directories(run, ec);
  if (ec) fail("--out ", req.out, ": cannot create the run directory (", ec.message(), ")");
  lock.emplace(req.out);
  if (!fs::is_empty(run, ec)) {  // checked again under the lock: another run may have started meanwhile
    if (!is_unstarted_run(req.out))
      fail("--out ", req.out, ": already exists and is not empty (continue it with --resume ", req.out,
           ", or choose another --out)");
    if (fs::exists(run / "config.json") || fs::exists(run / "metrics.jsonl"))
      std::fprintf(stderr, "note: %s never reached its first checkpoint; starting it again\n", req.out.c_str());
    clear_unstarted_run(req.out);
  }
  write_file_atomic((run / "config.json").string(), model::config_to_json(s.model).dump(2) + "\n");
  write_file_atomic((run / "train_config.json").string(), train_config_to_json(s.config).dump(2) + "\n");
  json info{{"data", fs::absolute(req.data).string()}, {"init_from", req.init_from}};
  write_file_atomic((run / "run.json").string(), info.dump(2) + "\n");
  return !existed;
}

RunSetup setup_resume(const TrainRequest& req, std::optional<RunLock>& lock) {
  const fs::path run(req.out);
  std::error_code ec;
  if (!fs::is_directory(run, ec)) fail("--resume ", req.out, ": no such run directory");
  lock.emplace(req.out);
  if (!fs::exists(run / "latest") && is_unstarted_run(req.out))
    fail("--resume ", req.out, ": the run never reached its first checkpoint, so there is nothing to resume; start it "
         "again with --out ", req.out, " and the same flags");
  if (!fs::exists(run / "latest"))
    fail(req.out, ": no checkpoint to resume from (", (run / "latest").string(), " is missing)");
  RunSetup s;
  TrainingCheckpoint ck = load_training_checkpoint(req.out);
  // The checkpoint's own record of its hyper-parameters is authoritative: train_config.json is
  // only rewritten at checkpoints, so a resume that failed before one cannot change the budget
  // behind the next resume's back, and a hand edit is noticed instead of used.
  const fs::path file = run / "train_config.json";
  s.config = train_config_from_json(ck.state.train_config.is_null() ? read_json(file) : ck.state.train_config,
                                    ck.state.train_config.is_null() ? file.string() : "the checkpoint's train_config");
  if (!ck.state.train_config.is_null() && fs::exists(file)) {
    const json on_disk = train_config_to_json(train_config_from_json(read_json(file), file.string()));
    const json in_checkpoint = train_config_to_json(s.config);
    for (auto& [key, value] : in_checkpoint.items())
      if (on_disk[key] != value)
        std::fprintf(stderr,
                     "note: %s sets %s = %s but the checkpoint was trained with %s; the checkpoint's value is used "
                     "(change the budget with flags such as --steps)\n",
                     file.string().c_str(), key.c_str(), on_disk[key].dump().c_str(), value.dump().c_str());
  }
  const json saved = train_config_to_json(s.config), given = train_config_to_json(req.config);
  json merged = saved;
  for (const std::string& key : req.explicit_flags) {
    if (!given.contains(key) || given[key] == saved[key]) continue;
    if (!may_change_on_resume(key))
      fail("--resume ", req.out, ": the run was started with ", key, " = ", saved[key].dump(),
           "; it cannot change to ", given[key].dump(), " (only the budget and the eval/save cadence can",
           key == "grad_accum" ? "; grad_accum counts a step's micro-batches over all ranks: with N ranks, "
                                 "--grad-accum is per rank"
                               : "",
           ")");
    merged[key] = given[key];
  }
  s.config = train_config_from_json(merged, "resume");
  s.config.validate();
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
  if (merged != saved) {  // a new budget: re-plan (recorded at the next checkpoint)
    // A minutes-only budget (planned 0) is re-estimated from this segment's first steps.
    s.state.planned_steps = s.config.planned_steps() > 0 ? std::max(s.config.planned_steps(), s.state.step) : 0;
  }
  s.state.train_config = train_config_to_json(s.config);
  if (const auto dropped = keep_records_through_step(run / "metrics.jsonl", s.state.step))
    std::fprintf(stderr, "note: %s\n", dropped->c_str());
  return s;
}

TrainOutcome train_loop(const TrainRequest& req, RunSetup& s, const fs::path& run, const io::TokenDataset& data,
                        const std::vector<int32_t>& train_stream, const std::vector<int32_t>& val_stream,
                        dist::Communicator& comm, const MicroBatchShare& share) {
  const bool rank0 = comm.rank() == 0;
  const TrainConfig& tc = s.config;
  const io::DatasetManifest& mf = data.manifest();
  const double val_bytes_per_token =
      mf.val.tokens > 0 ? static_cast<double>(mf.val.bytes) / static_cast<double>(mf.val.tokens) : 1.0;

  model::Model<float> model(s.model);
  model.load_params(s.params);
  model.set_bf16_matmuls(tc.precision == "bf16");
  if (tc.precision == "bf16") {
    // Said once, before the first step: without bf16 units the products are emulated.
    const std::string warning = kernels::bf16_emulation_warning("--precision bf16");
    if (!warning.empty() && rank0) std::fprintf(stderr, "%s\n", warning.c_str());
  }
  AdamW<float> optimizer(model.layout(), AdamWConfig{tc.beta1, tc.beta2, tc.eps, tc.weight_decay});
  optimizer.m() = s.adam_m;
  optimizer.v() = s.adam_v;
  optimizer.set_steps_taken(s.state.step);
  SpikeDetector spikes(tc.spike_window, tc.spike_margin, tc.warmup);
  spikes.restore({s.state.loss_history.begin(), s.state.loss_history.end()}, s.state.spike_steps);
  TrainingState& state = s.state;

  std::optional<MetricsWriter> metrics;  // rank 0 writes the run directory
  if (rank0) metrics.emplace(run / "metrics.jsonl");
  auto record = [&](const json& j) {
    if (rank0) metrics->append(j);
  };
  dist::GradientSum grad_sum(comm, model.grads().size(), share.count);
  StepBalance balance(model, comm, share.count);  // MoE: the step's expert loads (train/moe_balance.h)

  const auto segment_start = std::chrono::steady_clock::now();
  const double elapsed_before = state.elapsed_s;
  auto elapsed = [&] {
    return elapsed_before + std::chrono::duration<double>(std::chrono::steady_clock::now() - segment_start).count();
  };
  double train_seconds = 0.0;  // time in training steps (not evaluation or saving), this segment
  int64_t trained_tokens = 0;

  auto save = [&] {
    if (!rank0) return;
    state.elapsed_s = elapsed();
    state.loss_history.assign(spikes.history().begin(), spikes.history().end());
    state.spike_steps = spikes.spike_steps();
    std::vector<float> params(model.params().begin(), model.params().end());
    save_training_checkpoint(req.out, s.model, params, optimizer.m(), optimizer.v(), state, tc.keep_checkpoints);
    // After the checkpoint (which holds its own copy): the file a reader sees agrees with it.
    write_file_atomic((run / "train_config.json").string(), train_config_to_json(tc).dump(2) + "\n");
  };
  json last_eval;
  // False when a signal cut the evaluation short (on any rank): nothing is recorded, the
  // run stops as interrupted (a long held-out pass must not keep Ctrl-C waiting).
  auto evaluate = [&] {
    const std::optional<eval::EvalResult> r =
        evaluate_shared(comm, model, val_stream, mf.bos_id, tc.seq_len, tc.eval_tokens, tc.batch_size,
                        val_bytes_per_token, [] { return g_interrupted.load(); });
    if (!r) {
      g_interrupted = true;
      return false;
    }
    last_eval = {{"step", state.step}, {"val_loss", r->loss}, {"val_ppl", r->ppl}, {"val_bpb", r->bpb},
                 {"val_tokens", r->tokens}};
    record(last_eval);
    return true;
  };
  auto summary = [&](const std::string& outcome) {
    if (!rank0) return;
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

  // Probes on rank 0 only (the others wait for it at the next step's gradient sum).
  bool probed_at_step = false;
  auto probe = [&] {
    probed_at_step = true;
    if (!rank0) return;
    json rec = req.probe(s.model, model.params(), ProbeInput{val_stream, mf.bos_id, tc.seq_len, tc.probe_windows});
    rec["step"] = state.step;
    record(rec);
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

  if (rank0)
    std::fprintf(stderr, "%s %s: %lld parameters, %lld tokens/step, %s%s\n", req.resume ? "resuming" : "training",
                 req.out.c_str(), static_cast<long long>(model.layout().total()),
                 static_cast<long long>(tc.tokens_per_step()),
                 state.planned_steps ? cat(state.planned_steps, " steps planned").c_str()
                                     : cat(tc.minutes, " minutes").c_str(),
                 comm.size() > 1 ? cat(", data-parallel on ", comm.describe()).c_str() : "");
  Progress progress("train", std::max<int64_t>(state.planned_steps, 1));
  // A resumed run's current step is already its latest checkpoint (never rewritten in place).
  bool saved_at_step = req.resume, evaluated_at_step = false;
  const int64_t first_step = state.step;
  auto at_stop = [&] { return req.stop_at_step > 0 && state.step >= req.stop_at_step; };
  bool out_of_time = false;  // req.stop_after_s reached: a pause, never the end of the run
  auto stop_interrupted = [&] {
    std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C stops at once
    if (!saved_at_step) save();
    summary("interrupted");
    if (rank0)
      std::fprintf(stderr, "\ninterrupted at step %lld: checkpoint saved; continue with gatedlm train --resume %s\n",
                   static_cast<long long>(state.step), req.out.c_str());
    return TrainOutcome::interrupted;
  };
  // An evaluation cut short by a signal is not recorded: the resumed run does it first, so
  // that its metrics are those of a run never stopped. (Rank 0 reads the metrics.)
  if (req.resume && tc.eval_every > 0 && state.step > 0 && state.step % tc.eval_every == 0 &&
      dist::any_rank(comm, rank0 && !has_evaluation_record(run / "metrics.jsonl", state.step))) {
    if (!evaluate()) return stop_interrupted();
    evaluated_at_step = true;
  }
  // One process drops a step that a signal interrupts; ranks finish it together (the
  // gradient sum is collective) and stop after it.
  auto stop_mid_step = [&] { return comm.size() == 1 && g_interrupted; };
  while ((state.planned_steps == 0 || state.step < state.planned_steps) && !at_stop()) {
    // Rank 0's clock decides time budgets, so that every rank stops at the same step.
    if (req.stop_after_s > 0 && dist::from_root(comm, elapsed() - elapsed_before) >= req.stop_after_s) {
      out_of_time = true;
      break;
    }
    if (tc.minutes > 0 && dist::from_root(comm, elapsed()) >= tc.minutes * 60.0) break;
    const auto t0 = std::chrono::steady_clock::now();
    // This rank's micro-batches of the step, each gradient added into grad_sum, which
    // sums over the ranks and leaves the step's mean gradient in model.grads().
    std::vector<double> micro_losses(share.count), micro_lb(share.count), micro_z(share.count);
    auto micro_batch = [&](int64_t i) {
      return io::training_batch(train_stream, tc.batch_size, tc.seq_len, mf.bos_id, tc.seed, state.step,
                            share.first + i);
    };
    balance.begin_step([&](int64_t i) {
      const io::Batch b = micro_batch(i);
      return model.route_counts(b.inputs.data(), b.batch, b.seq);
    });
    for (int64_t i = 0; i < share.count && !stop_mid_step(); ++i) {
      model.zero_grads();
      io::Batch b = micro_batch(i);
      micro_losses[i] = model.forward(b.inputs.data(), b.targets.data(), b.batch, b.seq);
      balance.after_forward();
      const model::MoeAuxLosses aux = model.moe_aux();
      micro_lb[i] = aux.lb;
      micro_z[i] = aux.z;
      model.backward();
      grad_sum.add(model.grads());
    }
    if (stop_mid_step()) break;  // the partial step is dropped, the state saved below
    grad_sum.finish(model.grads(), tc.grad_accum);
    const double loss = step_mean_loss(comm, micro_losses);
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
    rec["threads"] = omp_get_max_threads();  // fewer than the cores while other programs were busy (core/thread_governor.h)
    if (comm.size() > 1) rec["allreduce_s"] = grad_sum.last_reduce_seconds();
    if (s.model.has_moe()) {  // the auxiliary losses (step means) and their weights
      rec["lb_loss"] = step_mean_loss(comm, micro_lb);
      rec["z_loss"] = step_mean_loss(comm, micro_z);
      rec["lb_coef"] = s.model.moe.lb_coef;
      rec["z_coef"] = s.model.moe.z_coef;
      if (balance.global()) rec["lb_count_s"] = balance.last_seconds();
    }
    record(rec);
    // A minutes-only budget fixes its step count after a few steps, from their speed.
    // (On a resume with a new minutes budget, from this segment's first 3 steps.)
    if (state.planned_steps == 0 && state.step - first_step == 3) {
      const double now = dist::from_root(comm, elapsed());
      const double per_step = (now - elapsed_before) / 3.0;
      const double left_s = std::max(0.0, tc.minutes * 60.0 - now);
      state.planned_steps = std::max<int64_t>(state.step + 1, state.step + static_cast<int64_t>(left_s / per_step));
    }
    evaluated_at_step = saved_at_step = probed_at_step = false;
    if (tc.probe_every > 0 && state.step % tc.probe_every == 0) probe();
    if (tc.eval_every > 0 && state.step % tc.eval_every == 0) evaluated_at_step = evaluate();
    if (tc.save_every > 0 && state.step % tc.save_every == 0) {
      save();
      saved_at_step = true;
    }
    if (rank0)
      progress.update(state.step, cat("loss ", std::to_string(loss).substr(0, 6), "  ",
                                      static_cast<int64_t>(tps), " tok/s"));
    if (dist::any_rank(comm, g_interrupted)) {  // all ranks stop at the same step
      g_interrupted = true;
      break;
    }
  }
  if (g_interrupted) return stop_interrupted();
  if (rank0) progress.finish(cat("step ", state.step));
  if ((out_of_time || (at_stop() && !req.stop_is_final)) &&
      (state.planned_steps == 0 || state.step < state.planned_steps)) {
    if (!saved_at_step) save();
    summary("paused");
    return TrainOutcome::paused;
  }
  if (tc.probe_every > 0 && !probed_at_step) probe();
  if (!evaluated_at_step && !evaluate()) return stop_interrupted();
  if (!saved_at_step) save();
  summary("completed");
  if (rank0)
    std::fprintf(stderr, "done: %lld steps, val_loss %.4f, val_bpb %.4f, %zu loss spikes\n",
               static_cast<long long>(state.step), last_eval["val_loss"].get<double>(),
               last_eval["val_bpb"].get<double>(), spikes.spike_steps().size());
  return TrainOutcome::completed;
}

}  // namespace

TrainOutcome run_training(const TrainRequest& request) {
  std::unique_ptr<dist::Communicator> own_comm = request.comm ? nullptr : dist::single_process();
  dist::Communicator& comm = request.comm ? *request.comm : *own_comm;
  // --grad-accum is per rank; the run directory records the step's global micro-batches.
  TrainRequest req = request;
  req.config.grad_accum *= comm.size();
  std::optional<RunLock> lock;  // rank 0 holds it for the whole run
  bool created = false;
  RunSetup s = set_up_on_rank0(comm, [&] {
    RunSetup setup = req.resume ? setup_resume(req, lock) : plan_new_run(req);
    const io::TokenDataset checked = io::TokenDataset::open(setup.data);
    const io::DatasetManifest& mf = checked.manifest();
    check_against_data(setup, mf, mf.train.tokens, mf.val.tokens);
    if (setup.config.probe_every > 0 && !req.probe)
      fail("--probe-every: this command cannot probe during training (use gatedlm train or gatedlm sweep)");
    // A new run's directory is made only now, when everything has been checked; if the run
    // then fails before its first checkpoint, what it wrote is removed again.
    created = !req.resume && create_run_dir(req, setup, lock);
    return setup;
  });
  const fs::path run(req.out);
  const MicroBatchShare share = micro_batch_share(s.config, comm);
  const io::TokenDataset data = io::TokenDataset::open(s.data);
  const std::vector<int32_t> train_stream = data.load_split("train");
  const std::vector<int32_t> val_stream = data.load_split("val");
  try {
    return train_loop(req, s, run, data, train_stream, val_stream, comm, share);
  } catch (...) {
    std::error_code ec;
    // A diverged run keeps its summary ("non-finite") for the record; it can still be started
    // again with --out, like any run without a checkpoint.
    const bool diverged = fs::exists(run / "summary.json", ec) &&
                          read_whole_file((run / "summary.json").string()).find("\"non-finite\"") != std::string::npos;
    if (comm.rank() == 0 && !req.resume && !diverged && !fs::exists(run / "latest", ec)) {
      clear_unstarted_run(req.out);
      if (created) fs::remove_all(run, ec);
    }
    throw;
  }
}

}  // namespace gatedlm::train
