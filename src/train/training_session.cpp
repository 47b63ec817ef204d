#include "train/training_session.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/atomic_file.h"
#include "core/error.h"
#include "dist/collectives.h"
#include "io/token_windows.h"
#include "kernels/bf16_support.h"
#include "train/interrupt.h"
#include "train/run_dir.h"

namespace gatedlm::train {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

double global_norm(std::span<const float> g) {
  double s = 0.0;
  for (float x : g) s += static_cast<double>(x) * static_cast<double>(x);
  return std::sqrt(s);
}

void scale(std::span<float> g, float factor) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < g.size(); ++i) g[i] *= factor;
}

double bytes_per_token(const io::SplitInfo& split) {
  return split.tokens > 0 ? static_cast<double>(split.bytes) / static_cast<double>(split.tokens) : 1.0;
}

}  // namespace

TrainingSession::TrainingSession(const TrainRequest& req, RunSetup& setup, const TrainingData& data,
                                 dist::Communicator& comm, const MicroBatchShare& share)
    : req_(req),
      setup_(setup),
      tc_(setup.config),
      state_(setup.state),
      data_(data),
      run_(req.out),
      comm_(comm),
      share_(share),
      rank0_(comm.rank() == 0),
      val_bytes_per_token_(bytes_per_token(data.manifest.val)),
      model_(setup.model),
      optimizer_(model_.layout(), AdamWConfig{tc_.beta1, tc_.beta2, tc_.eps, tc_.weight_decay}),
      spikes_(tc_.spike_window, tc_.spike_margin, tc_.warmup),
      grad_sum_(comm, model_.grads().size(), share.count),
      balance_(model_, comm, share.count),
      clock_(setup.state.elapsed_s) {
  model_.load_params(setup.params);
  model_.set_bf16_matmuls(tc_.precision == "bf16");
  if (tc_.precision == "bf16") {
    // Said once, before the first step: without bf16 units the products are emulated.
    const std::string warning = kernels::bf16_emulation_warning("--precision bf16");
    if (!warning.empty() && rank0_) std::fprintf(stderr, "%s\n", warning.c_str());
  }
  optimizer_.m() = setup.adam_m;
  optimizer_.v() = setup.adam_v;
  optimizer_.set_steps_taken(state_.step);
  spikes_.restore({state_.loss_history.begin(), state_.loss_history.end()}, state_.spike_steps);
  if (rank0_) metrics_.emplace(run_ / "metrics.jsonl");
  clock_ = RunClock(state_.elapsed_s);  // this segment's time starts with the model ready
}

// The signal handler is installed for the steps only (a Ctrl-C while the data loads still
// ends the process at once) and given back when they end, however they end.
TrainOutcome TrainingSession::run() {
  interrupts_.emplace();
  struct Uninstall {
    std::optional<InterruptHandling>& interrupts;
    ~Uninstall() { interrupts.reset(); }
  } uninstall{interrupts_};
  return run_steps();
}

TrainOutcome TrainingSession::run_steps() {
  announce();
  progress_.emplace("train", std::max<int64_t>(state_.planned_steps, 1));
  // A resumed run's current step is already its latest checkpoint (never rewritten in place).
  saved_at_step_ = req_.resume;
  first_step_ = state_.step;
  if (resume_evaluation_missing()) {
    if (!evaluate()) return stop_interrupted();
    evaluated_at_step_ = true;
  }
  while (budget_left() && !time_is_up()) {
    const std::optional<Step> step = train_step();
    if (!step) break;  // a signal dropped the partial step; the state is saved below
    record_step(*step);
    fix_minutes_budget();
    bookkeeping_after_step(*step);
    if (dist::any_rank(comm_, interrupts_->requested())) {  // all ranks stop at the same step
      interrupts_->request();
      break;
    }
  }
  if (interrupts_->requested()) return stop_interrupted();
  return finish();
}

void TrainingSession::announce() const {
  if (!rank0_) return;
  std::fprintf(stderr, "%s %s: %lld parameters, %lld tokens/step, %s%s\n", req_.resume ? "resuming" : "training",
               req_.out.c_str(), static_cast<long long>(model_.layout().total()),
               static_cast<long long>(tc_.tokens_per_step()),
               state_.planned_steps ? cat(state_.planned_steps, " steps planned").c_str()
                                    : cat(tc_.minutes, " minutes").c_str(),
               comm_.size() > 1 ? cat(", data-parallel on ", comm_.describe()).c_str() : "");
}

// An evaluation cut short by a signal is not recorded: the resumed run does it first, so
// that its metrics are those of a run never stopped. (Rank 0 reads the metrics.)
bool TrainingSession::resume_evaluation_missing() {
  return req_.resume && tc_.eval_every > 0 && state_.step > 0 && state_.step % tc_.eval_every == 0 &&
         dist::any_rank(comm_, rank0_ && !has_evaluation_record(run_ / "metrics.jsonl", state_.step));
}

bool TrainingSession::at_stop_step() const { return req_.stop_at_step > 0 && state_.step >= req_.stop_at_step; }

bool TrainingSession::budget_left() const {
  return (state_.planned_steps == 0 || state_.step < state_.planned_steps) && !at_stop_step();
}

// Rank 0's clock decides time budgets, so that every rank stops at the same step.
bool TrainingSession::time_is_up() {
  if (req_.stop_after_s > 0 && dist::from_root(comm_, clock_.elapsed() - clock_.before()) >= req_.stop_after_s) {
    out_of_time_ = true;
    return true;
  }
  return tc_.minutes > 0 && dist::from_root(comm_, clock_.elapsed()) >= tc_.minutes * 60.0;
}

// Gradients, the step's mean loss, clipping and the optimizer step. Nothing when a signal
// stopped a single process mid-step (ranks finish a step together: the gradient sum is
// collective).
std::optional<TrainingSession::Step> TrainingSession::train_step() {
  const auto t0 = std::chrono::steady_clock::now();
  if (!accumulate_gradients()) return std::nullopt;
  grad_sum_.finish(model_.grads(), tc_.grad_accum);
  Step step;
  step.loss = step_mean_loss(comm_, micro_losses_);
  step.grad_norm = global_norm(model_.grads());
  fail_if_not_finite(step.loss, step.grad_norm);
  if (tc_.clip > 0 && step.grad_norm > tc_.clip)
    scale(model_.grads(), static_cast<float>(tc_.clip / (step.grad_norm + 1e-6)));
  step.lr = learning_rate(tc_, state_.step, std::max<int64_t>(state_.planned_steps, state_.step + 1));
  optimizer_.step(model_.params(), model_.grads(), step.lr);
  step.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return step;
}

// This rank's micro-batches of the step, each gradient added into grad_sum_, which sums
// over the ranks and leaves the step's mean gradient in model_.grads(). False when a
// signal stopped a single process before the last one.
bool TrainingSession::accumulate_gradients() {
  const auto stop_mid_step = [&] { return comm_.size() == 1 && interrupts_->requested(); };
  const auto micro_batch = [&](int64_t i) {
    return io::training_batch(data_.train, tc_.batch_size, tc_.seq_len, data_.manifest.bos_id, tc_.seed, state_.step,
                              share_.first + i);
  };
  micro_losses_.assign(share_.count, 0.0);
  micro_lb_.assign(share_.count, 0.0);
  micro_z_.assign(share_.count, 0.0);
  balance_.begin_step([&](int64_t i) {
    const io::Batch b = micro_batch(i);
    return model_.route_counts(b.inputs.data(), b.batch, b.seq);
  });
  for (int64_t i = 0; i < share_.count && !stop_mid_step(); ++i) {
    model_.zero_grads();
    io::Batch b = micro_batch(i);
    micro_losses_[i] = model_.forward(b.inputs.data(), b.targets.data(), b.batch, b.seq);
    balance_.after_forward();
    const model::MoeAuxLosses aux = model_.moe_aux();
    micro_lb_[i] = aux.lb;
    micro_z_[i] = aux.z;
    model_.backward();
    grad_sum_.add(model_.grads());
  }
  return !stop_mid_step();
}

// A NaN/Inf loss or gradient ends the run ("non-finite" summary); the last good checkpoint
// stays the latest.
void TrainingSession::fail_if_not_finite(double loss, double norm) {
  if (std::isfinite(loss) && std::isfinite(norm)) return;
  write_summary("non-finite");
  fail("step ", state_.step + 1, ": the ", std::isfinite(loss) ? "gradient norm" : "loss", " is ",
       std::isfinite(loss) ? norm : loss, ". Training stopped; the last good checkpoint is kept (",
       fs::exists(run_ / "latest") ? "resume with --resume " + req_.out : "none was saved yet",
       "). A lower --lr or a --clip may help.");
}

// Counts the step and writes its metrics.jsonl record.
void TrainingSession::record_step(const Step& step) {
  train_seconds_ += step.seconds;
  trained_tokens_ += tc_.tokens_per_step();
  state_.step += 1;
  state_.tokens_seen += tc_.tokens_per_step();
  const bool spike = spikes_.observe(state_.step, step.loss);
  json rec{{"step", state_.step},         {"lr", step.lr},
           {"loss", step.loss},           {"grad_norm", step.grad_norm},
           {"tokens_per_s", tokens_per_s(step)}, {"elapsed_s", clock_.elapsed()}};
  if (spike) rec["spike"] = true;
  rec["threads"] = omp_get_max_threads();  // fewer than the cores while other programs were busy (core/thread_governor.h)
  if (comm_.size() > 1) rec["allreduce_s"] = grad_sum_.last_reduce_seconds();
  if (setup_.model.has_moe()) {  // the auxiliary losses (step means) and their weights
    rec["lb_loss"] = step_mean_loss(comm_, micro_lb_);
    rec["z_loss"] = step_mean_loss(comm_, micro_z_);
    rec["lb_coef"] = setup_.model.moe.lb_coef;
    rec["z_coef"] = setup_.model.moe.z_coef;
    if (balance_.global()) rec["lb_count_s"] = balance_.last_seconds();
  }
  record(rec);
}

double TrainingSession::tokens_per_s(const Step& step) const {
  return static_cast<double>(tc_.tokens_per_step()) / step.seconds;
}

// A minutes-only budget fixes its step count after a few steps, from their speed. (On a
// resume with a new minutes budget, from this segment's first 3 steps.)
void TrainingSession::fix_minutes_budget() {
  if (state_.planned_steps != 0 || state_.step - first_step_ != 3) return;
  const double now = dist::from_root(comm_, clock_.elapsed());
  const double per_step = (now - clock_.before()) / 3.0;
  const double left_s = std::max(0.0, tc_.minutes * 60.0 - now);
  state_.planned_steps = std::max<int64_t>(state_.step + 1, state_.step + static_cast<int64_t>(left_s / per_step));
  if (progress_) progress_->set_total(state_.planned_steps);  // it was drawn against 1 until now
}

// The probe, evaluation and checkpoint due at this step, and the progress line.
void TrainingSession::bookkeeping_after_step(const Step& step) {
  evaluated_at_step_ = saved_at_step_ = probed_at_step_ = false;
  if (tc_.probe_every > 0 && state_.step % tc_.probe_every == 0) probe();
  if (tc_.eval_every > 0 && state_.step % tc_.eval_every == 0) evaluated_at_step_ = evaluate();
  if (tc_.save_every > 0 && state_.step % tc_.save_every == 0) {
    save();
    saved_at_step_ = true;
  }
  if (rank0_)
    progress_->update(state_.step, cat("loss ", std::to_string(step.loss).substr(0, 6), "  ",
                                       static_cast<int64_t>(tokens_per_s(step)), " tok/s"));
}

// The end of the segment without a signal: a pause (checkpoint, "paused") or the end of
// the run (final probe and evaluation, checkpoint, "completed").
TrainOutcome TrainingSession::finish() {
  const bool pause = (out_of_time_ || (at_stop_step() && !req_.stop_is_final)) &&
                     (state_.planned_steps == 0 || state_.step < state_.planned_steps);
  if (rank0_) {
    if (pause) progress_->stop(state_.step, cat("paused at step ", state_.step));
    else progress_->finish(cat("step ", state_.step));
  }
  if (pause) {
    if (!saved_at_step_) save();
    write_summary("paused");
    return TrainOutcome::paused;
  }
  if (tc_.probe_every > 0 && !probed_at_step_) probe();
  if (!evaluated_at_step_ && !evaluate()) return stop_interrupted();
  if (!saved_at_step_) save();
  write_summary("completed");
  if (rank0_)
    std::fprintf(stderr, "done: %lld steps, val_loss %.4f, val_bpb %.4f, %zu loss spikes\n",
                 static_cast<long long>(state_.step), last_eval_["val_loss"].get<double>(),
                 last_eval_["val_bpb"].get<double>(), spikes_.spike_steps().size());
  return TrainOutcome::completed;
}

// The checkpoint of the current step (rank 0), then train_config.json.
void TrainingSession::save() {
  if (!rank0_) return;
  state_.elapsed_s = clock_.elapsed();
  state_.loss_history.assign(spikes_.history().begin(), spikes_.history().end());
  state_.spike_steps = spikes_.spike_steps();
  std::vector<float> params(model_.params().begin(), model_.params().end());
  save_training_checkpoint(req_.out, setup_.model, params, optimizer_.m(), optimizer_.v(), state_,
                           tc_.keep_checkpoints);
  // After the checkpoint (which holds its own copy): the file a reader sees agrees with it.
  write_file_atomic((run_ / "train_config.json").string(), train_config_to_json(tc_).dump(2) + "\n");
}

// The validation loss, recorded. False when a signal cut the evaluation short (on any
// rank): nothing is recorded and the run stops as interrupted (a long held-out pass must
// not keep Ctrl-C waiting).
bool TrainingSession::evaluate() {
  const std::optional<eval::EvalResult> r =
      evaluate_shared(comm_, model_, data_.val, data_.manifest.bos_id, tc_.seq_len, tc_.eval_tokens, tc_.batch_size,
                      val_bytes_per_token_, [this] { return interrupts_->requested(); });
  if (!r) {
    interrupts_->request();
    return false;
  }
  last_eval_ = {{"step", state_.step}, {"val_loss", r->loss}, {"val_ppl", r->ppl}, {"val_bpb", r->bpb},
                {"val_tokens", r->tokens}};
  record(last_eval_);
  return true;
}

// Probes on rank 0 only (the others wait for it at the next step's gradient sum).
void TrainingSession::probe() {
  probed_at_step_ = true;
  if (!rank0_) return;
  json rec = req_.probe(setup_.model, model_.params(),
                        ProbeInput{data_.val, data_.manifest.bos_id, tc_.seq_len, tc_.probe_windows});
  rec["step"] = state_.step;
  record(rec);
}

void TrainingSession::write_summary(const std::string& outcome) {
  if (!rank0_) return;
  json j{{"outcome", outcome},
         {"steps", state_.step},
         {"tokens_seen", state_.tokens_seen},
         {"params", model_.layout().total()},
         {"spikes", {{"count", spikes_.spike_steps().size()}, {"steps", spikes_.spike_steps()}}},
         {"tokens_per_s", train_seconds_ > 0 ? static_cast<double>(trained_tokens_) / train_seconds_ : 0.0},
         {"elapsed_s", clock_.elapsed()},
         {"final_train_loss", spikes_.history().empty() ? json(nullptr) : json(spikes_.history().back())}};
  for (const char* key : {"val_loss", "val_ppl", "val_bpb"})
    j[key] = last_eval_.contains(key) ? last_eval_[key] : json(nullptr);
  write_file_atomic((run_ / "summary.json").string(), j.dump(2) + "\n");
}

// Saves the current step (unless it is saved already) and says how to continue.
TrainOutcome TrainingSession::stop_interrupted() {
  InterruptHandling::allow_immediate_stop();  // a second Ctrl-C stops at once
  if (!saved_at_step_) save();
  write_summary("interrupted");
  if (rank0_)
    std::fprintf(stderr, "\ninterrupted at step %lld: checkpoint saved; continue with gatedlm train --resume %s\n",
                 static_cast<long long>(state_.step), req_.out.c_str());
  return TrainOutcome::interrupted;
}

void TrainingSession::record(const json& rec) {
  if (!rank0_) return;
  metrics_->append(rec);
  if (req_.on_record && !req_.on_record(rec) && interrupts_) interrupts_->request();
}

}  // namespace gatedlm::train
