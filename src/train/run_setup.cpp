#include "train/run_setup.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_file.h"
#include "core/memory.h"
#include "dist/communicator.h"
#include "io/checkpoint.h"
#include "io/token_dataset.h"
#include "model/init.h"
#include "model/param_layout.h"
#include "train/metrics_log.h"

namespace gatedlm::train {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Hyper-parameters a resumed run may change: the budget and the bookkeeping cadence.
bool may_change_on_resume(const std::string& key) {
  return key == "steps" || key == "tokens" || key == "minutes" || key == "eval_every" || key == "save_every" ||
         key == "keep_checkpoints" || key == "eval_tokens" || key == "probe_every";
}

json read_json(const fs::path& path) { return read_json_file(path.string(), "run file"); }

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

// Refuses an --out that holds something other than a run never started, and checks that
// the directory can be created (tried, and undone: it is made after all checks).
void check_out_is_free(const TrainRequest& req) {
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
}

// A new run's model and first weights: --init-from's (checked against the model config,
// when one is given) or fresh ones from the config and the seed.
void initial_model(const TrainRequest& req, RunSetup& s) {
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
}

// Everything a new run needs, checked before anything is written.
RunSetup plan_new_run(const TrainRequest& req) {
  check_out_is_free(req);
  RunSetup s;
  s.config = req.config;
  s.config.validate();
  s.data = req.data;
  initial_model(req, s);
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

// Locks the run to resume and loads its latest checkpoint.
TrainingCheckpoint lock_and_load_checkpoint(const TrainRequest& req, std::optional<RunLock>& lock) {
  const fs::path run(req.out);
  std::error_code ec;
  if (!fs::is_directory(run, ec)) fail("--resume ", req.out, ": no such run directory");
  lock.emplace(req.out);
  if (!fs::exists(run / "latest") && is_unstarted_run(req.out))
    fail("--resume ", req.out, ": the run never reached its first checkpoint, so there is nothing to resume; start it "
         "again with --out ", req.out, " and the same flags");
  if (!fs::exists(run / "latest"))
    fail(req.out, ": no checkpoint to resume from (", (run / "latest").string(), " is missing)");
  return load_training_checkpoint(req.out);
}

// The hyper-parameters the checkpoint was trained with. The checkpoint's own record of them
// is authoritative: train_config.json is only rewritten at checkpoints, so a resume that
// failed before one cannot change the budget behind the next resume's back, and a hand edit
// is noticed (with a note) instead of used.
TrainConfig checkpoint_config(const TrainingCheckpoint& ck, const fs::path& run) {
  const fs::path file = run / "train_config.json";
  TrainConfig config =
      train_config_from_json(ck.state.train_config.is_null() ? read_json(file) : ck.state.train_config,
                             ck.state.train_config.is_null() ? file.string() : "the checkpoint's train_config");
  if (!ck.state.train_config.is_null() && fs::exists(file)) {
    const json on_disk = train_config_to_json(train_config_from_json(read_json(file), file.string()));
    const json in_checkpoint = train_config_to_json(config);
    for (auto& [key, value] : in_checkpoint.items())
      if (on_disk[key] != value)
        std::fprintf(stderr,
                     "note: %s sets %s = %s but the checkpoint was trained with %s; the checkpoint's value is used "
                     "(change the budget with flags such as --steps)\n",
                     file.string().c_str(), key.c_str(), on_disk[key].dump().c_str(), value.dump().c_str());
  }
  return config;
}

// The saved hyper-parameters with the flags given on resume, which may change only the
// budget and the eval/save cadence.
json merge_resume_flags(const TrainRequest& req, const json& saved) {
  const json given = train_config_to_json(req.config);
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
  return merged;
}

RunSetup setup_resume(const TrainRequest& req, std::optional<RunLock>& lock) {
  const fs::path run(req.out);
  TrainingCheckpoint ck = lock_and_load_checkpoint(req, lock);
  RunSetup s;
  const json saved = train_config_to_json(checkpoint_config(ck, run));
  const json merged = merge_resume_flags(req, saved);
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

}  // namespace

RunSetup set_up_run(const TrainRequest& req, dist::Communicator& comm, RunDirHold& hold) {
  return set_up_on_rank0(comm, [&] {
    RunSetup setup = req.resume ? setup_resume(req, hold.lock) : plan_new_run(req);
    const io::TokenDataset checked = io::TokenDataset::open(setup.data);
    const io::DatasetManifest& mf = checked.manifest();
    check_against_data(setup, mf, mf.train.tokens, mf.val.tokens);
    if (setup.config.probe_every > 0 && !req.probe)
      fail("--probe-every: this command cannot probe during training (use gatedlm train or gatedlm sweep)");
    // A new run's directory is made only now, when everything has been checked; if the run
    // then fails before its first checkpoint, what it wrote is removed again.
    hold.created = !req.resume && create_run_dir(req, setup, hold.lock);
    return setup;
  });
}

void clean_up_failed_start(const TrainRequest& req, const dist::Communicator& comm, const RunDirHold& hold) {
  const fs::path run(req.out);
  std::error_code ec;
  // A diverged run keeps its summary ("non-finite") for the record; it can still be started
  // again with --out, like any run without a checkpoint.
  const bool diverged = fs::exists(run / "summary.json", ec) &&
                        read_whole_file((run / "summary.json").string()).find("\"non-finite\"") != std::string::npos;
  if (comm.rank() == 0 && !req.resume && !diverged && !fs::exists(run / "latest", ec)) {
    clear_unstarted_run(req.out);
    if (hold.created) fs::remove_all(run, ec);
  }
}

}  // namespace gatedlm::train
