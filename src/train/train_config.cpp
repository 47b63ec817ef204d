#include "train/train_config.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace gatedlm::train {

namespace {

void require(bool ok, const char* key, const std::string& why) {
  if (!ok) fail("training config: \"", key, "\" ", why);
}

}  // namespace

int64_t TrainConfig::planned_steps() const {
  if (steps > 0) {
    if (tokens > 0) return std::min(steps, (tokens + tokens_per_step() - 1) / tokens_per_step());
    return steps;
  }
  if (tokens > 0) return (tokens + tokens_per_step() - 1) / tokens_per_step();
  return 0;  // minutes only: the schedule is stretched over an estimate (see Trainer)
}

void TrainConfig::validate() const {
  require(batch_size >= 1, "batch_size", cat("must be positive, got ", batch_size));
  require(seq_len >= 2, "seq_len", cat("must be at least 2, got ", seq_len));
  require(grad_accum >= 1, "grad_accum", cat("must be positive, got ", grad_accum));
  // A step past this many tokens would run for days between checkpoints and signals.
  constexpr int64_t kMaxTokensPerStep = int64_t{1} << 30;
  int64_t per_step = 0;
  require(!__builtin_mul_overflow(batch_size, seq_len, &per_step) &&
              !__builtin_mul_overflow(per_step, grad_accum, &per_step) && per_step <= kMaxTokensPerStep,
          "grad_accum", cat("x batch_size x seq_len (", grad_accum, " x ", batch_size, " x ", seq_len,
                            ") is more than the limit of ", kMaxTokensPerStep, " tokens per optimizer step"));
  require(steps >= 0 && tokens >= 0 && minutes >= 0, "steps", "/ tokens / minutes must not be negative");
  require(steps > 0 || tokens > 0 || minutes > 0, "steps",
          "no budget: give --steps, --tokens or --minutes");
  require(lr > 0, "lr", cat("must be positive, got ", lr));
  require(min_lr >= 0 && min_lr <= lr, "min_lr", cat("must be in [0, lr], got ", min_lr));
  require(warmup >= 0, "warmup", cat("must not be negative, got ", warmup));
  require(weight_decay >= 0, "weight_decay", cat("must not be negative, got ", weight_decay));
  require(beta1 >= 0 && beta1 < 1, "beta1", cat("must be in [0, 1), got ", beta1));
  require(beta2 >= 0 && beta2 < 1, "beta2", cat("must be in [0, 1), got ", beta2));
  require(eps > 0, "eps", cat("must be positive, got ", eps));
  require(clip >= 0, "clip", cat("must be 0 (off) or positive, got ", clip));
  require(eval_every >= 0 && save_every >= 0, "eval_every", "/ save_every must not be negative");
  require(eval_tokens >= 0, "eval_tokens", cat("must be 0 (the whole split) or positive, got ", eval_tokens));
  for (double v : {minutes, lr, min_lr, weight_decay, beta1, beta2, eps, clip, spike_margin})
    require(std::isfinite(v), "lr", "/ min_lr / minutes / weight_decay / betas / eps / clip must be finite numbers");
  require(keep_checkpoints >= 1, "keep_checkpoints", "must be at least 1");
  require(spike_margin > 0, "spike_margin", "must be positive");
  require(spike_window >= 1, "spike_window", "must be at least 1");
  require(probe_every >= 0, "probe_every", cat("must be 0 (off) or positive, got ", probe_every));
  require(probe_windows >= 1, "probe_windows", cat("must be at least 1, got ", probe_windows));
  require(precision == "fp32" || precision == "bf16", "precision", cat("must be fp32 or bf16, got ", precision));
}

TrainConfig train_config_from_json(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) fail(source, ": expected a JSON object of training hyper-parameters");
  TrainConfig c;
  size_t used = 0;
  for_each_train_field(c, [&](const char* key, auto& field, const char*) {
    if (!j.contains(key)) return;
    ++used;
    const auto& v = j.at(key);
    using F = std::decay_t<decltype(field)>;
    if constexpr (std::is_same_v<F, std::string>) {
      if (!v.is_string()) fail(source, ": key \"", key, "\": expected a string, got ", v.dump());
    } else if constexpr (std::is_floating_point_v<F>) {
      if (!v.is_number()) fail(source, ": key \"", key, "\": expected a number, got ", v.dump());
    } else if constexpr (std::is_unsigned_v<F>) {
      if (!v.is_number_unsigned()) fail(source, ": key \"", key, "\": expected a non-negative integer, got ", v.dump());
    } else {
      if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX}))
        fail(source, ": key \"", key, "\": expected an integer, got ", v.dump());
    }
    field = v.get<F>();
  });
  if (used != j.size())
    for (const auto& item : j.items()) {
      const std::string& key = item.key();  // a plain name: clang 14 cannot capture structured bindings
      bool known = false;
      for_each_train_field(c, [&](const char* k, auto&, const char*) { known |= key == k; });
      if (!known) fail(source, ": unknown key \"", key, "\"");
    }
  return c;
}

nlohmann::json train_config_to_json(const TrainConfig& c) {
  nlohmann::json j = nlohmann::json::object();
  TrainConfig copy = c;
  for_each_train_field(copy, [&](const char* key, auto& field, const char*) { j[key] = field; });
  return j;
}

double learning_rate(const TrainConfig& c, int64_t step, int64_t total_steps) {
  if (step < c.warmup) return c.lr * static_cast<double>(step + 1) / static_cast<double>(c.warmup);
  const int64_t decay_steps = std::max<int64_t>(1, total_steps - c.warmup);
  const double progress = std::min(1.0, static_cast<double>(step - c.warmup) / static_cast<double>(decay_steps));
  return c.min_lr + 0.5 * (c.lr - c.min_lr) * (1.0 + std::cos(M_PI * progress));
}

}  // namespace gatedlm::train
