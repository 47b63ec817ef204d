#pragma once
// Training hyper-parameters: the keys of a training-config JSON and of RUN/train_config.json;
// each key has a command-line flag of the same name with dashes (batch_size: --batch-size).
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

namespace gatedlm::train {

struct TrainConfig {
  int64_t batch_size = 16;
  int64_t seq_len = 256;
  int64_t grad_accum = 1;
  // Budget: the first limit reached ends the run. steps 0 = derive from tokens; tokens 0 =
  // no token limit; minutes 0 = no time limit. At least one must be set.
  int64_t steps = 0;
  int64_t tokens = 0;
  double minutes = 0.0;
  double lr = 1e-3;
  double min_lr = 1e-4;
  int64_t warmup = 100;
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double clip = 1.0;  // global gradient-norm clip; 0 = off
  uint64_t seed = 1234;
  int64_t eval_every = 100;      // 0 = only at the end
  int64_t eval_tokens = 65536;   // validation tokens per evaluation (0 = the whole split)
  int64_t save_every = 500;      // 0 = only at the end
  int64_t keep_checkpoints = 2;  // older step checkpoints are pruned
  double spike_margin = 0.2;     // a spike: loss > (1 + margin) * median of the previous 100
  int64_t spike_window = 100;
  std::string precision = "fp32";  // fp32 | bf16 (bf16 matrix products, fp32 master weights)
  int64_t probe_every = 0;    // 0 = off: F-Attn, sink rate, M-Act, gate mean every N steps
  int64_t probe_windows = 8;  // validation windows of seq_len tokens per probe

  int64_t tokens_per_step() const { return batch_size * seq_len * grad_accum; }
  // Total steps the budget allows, ignoring minutes (which is checked as the run goes).
  int64_t planned_steps() const;
  void validate() const;  // throws naming the key
};

// Visits every hyper-parameter as (json key, field, help text): one table drives the JSON
// keys, the command-line flags and their --help, so a new one is added in one place.
template <typename F>
void for_each_train_field(TrainConfig& c, F&& f) {
  f("batch_size", c.batch_size, "sequences per micro-batch");
  f("seq_len", c.seq_len, "tokens per sequence (each starts with BOS)");
  f("grad_accum", c.grad_accum, "micro-batches per optimizer step");
  f("steps", c.steps, "budget: optimizer steps (0 = from --tokens or --minutes)");
  f("tokens", c.tokens, "budget: training tokens (0 = no token limit)");
  f("minutes", c.minutes, "budget: wall-clock minutes (0 = no time limit)");
  f("lr", c.lr, "peak learning rate");
  f("min_lr", c.min_lr, "learning rate at the end of the cosine decay");
  f("warmup", c.warmup, "linear warmup steps");
  f("weight_decay", c.weight_decay, "AdamW weight decay, on matrices only");
  f("beta1", c.beta1, "AdamW beta1");
  f("beta2", c.beta2, "AdamW beta2");
  f("eps", c.eps, "AdamW epsilon");
  f("clip", c.clip, "global gradient-norm clip (0 = off)");
  f("seed", c.seed, "seed of the initial weights and the data order");
  f("eval_every", c.eval_every, "validate every N steps (0 = only at the end)");
  f("eval_tokens", c.eval_tokens, "validation tokens per evaluation (0 = the whole split)");
  f("save_every", c.save_every, "checkpoint every N steps (0 = only at the end)");
  f("keep_checkpoints", c.keep_checkpoints, "step checkpoints to keep");
  f("spike_margin", c.spike_margin, "loss spike: loss above (1 + margin) x median of the window");
  f("spike_window", c.spike_window, "loss spike: steps in the median window");
  f("precision", c.precision, "fp32, or bf16: bf16 matrix products with fp32 weights, optimizer and accumulation");
  f("probe_every", c.probe_every,
    "every N steps (and at the end) record F-Attn, sink rate, M-Act and gate mean on probe_windows fixed validation "
    "windows in metrics.jsonl (0 = off). Cost per probe: one batch-1 forward over probe_windows x seq_len tokens "
    "with every layer's attention materialised, about probe_windows / (3 x batch_size x grad_accum) of a step "
    "(defaults: 8 windows, 1/6 of a step at batch 16), so N = 50 adds well under 1 %");
  f("probe_windows", c.probe_windows, "validation windows per probe (drawn once, seed 0, as `analyze --seed 0`)");
}

TrainConfig train_config_from_json(const nlohmann::json& j, const std::string& source);
nlohmann::json train_config_to_json(const TrainConfig& c);

// Learning rate at a step (0-based): linear warmup from lr/warmup to lr over `warmup`
// steps, then a half cosine from lr down to min_lr, reached at step total_steps (one past
// the last planned step; the decay spans total_steps - warmup steps, at least 1).
double learning_rate(const TrainConfig& c, int64_t step, int64_t total_steps);

}  // namespace gatedlm::train
