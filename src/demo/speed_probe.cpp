#include "demo/speed_probe.h"

#include <algorithm>
#include <chrono>

#include "eval/evaluate.h"
#include "io/token_windows.h"
#include "model/init.h"
#include "model/model.h"
#include "model/param_layout.h"
#include "train/optimizer.h"

namespace gatedlm::demo {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

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
  // plan is still only a plan: the segments re-plan from the speed training meets.
  int timed = 0;
  const auto t0 = Clock::now();
  while (timed < 3 || (timed < 20 && seconds_since(t0) < 2.0)) step(++timed);
  Speed s;
  s.step_s = seconds_since(t0) / timed;
  const int64_t n = std::min<int64_t>(tc.batch_size * tc.seq_len, static_cast<int64_t>(val.size()) - 1);
  const auto t1 = Clock::now();
  const eval::EvalResult r = eval::evaluate(m, val, bos, tc.seq_len, n, tc.batch_size, 1.0);
  const double fwd_s = seconds_since(t1);
  s.fwd_tps = r.tokens > 0 && fwd_s > 0 ? static_cast<double>(r.tokens) / fwd_s
                                        : static_cast<double>(tc.tokens_per_step()) / s.step_s * 3.0;
  return s;
}

}  // namespace gatedlm::demo
