#include "bench/train_speed.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>

#include "core/rng.h"
#include "kernels/matmul.h"
#include "model/init.h"
#include "model/model.h"
#include "model/param_layout.h"
#include "train/optimizer.h"

namespace gatedlm::bench {

using Clock = std::chrono::steady_clock;

int64_t matmul_params(const model::ModelConfig& c) {
  const model::ParamLayout layout(c);
  int64_t n = 0;
  for (const auto& s : layout.specs()) {
    const bool matrix = s.kind == model::ParamKind::matrix || s.kind == model::ParamKind::lm_head ||
                        (s.kind == model::ParamKind::gate && s.shape.size() == 2);
    if (matrix) n += s.numel;
  }
  if (c.tie_embeddings) n += c.vocab_size * c.d_model;  // the tied LM head is still a product
  return n;
}

double step_flops(const model::ModelConfig& c, int64_t batch, int64_t seq, bool forward_only) {
  const double tokens = static_cast<double>(batch * seq);
  const double full = 6.0 * static_cast<double>(matmul_params(c)) * tokens +
                      12.0 * static_cast<double>(c.n_layers * seq * c.n_heads * c.head_dim) * tokens;
  return forward_only ? full / 3.0 : full;
}

int64_t peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  return 0;
}

SpeedResult measure_training_speed(const model::ModelConfig& c, const SpeedOptions& o) {
  model::Model<float> m(c);
  std::vector<float> w;
  model::init_params(w, m.layout(), c, o.seed);
  m.load_params(w);
  m.set_bf16_matmuls(o.bf16);
  train::AdamW<float> opt(m.layout(), train::AdamWConfig{});
  Rng rng(o.seed);
  std::vector<int32_t> tokens(o.batch * o.seq), targets(o.batch * o.seq);
  for (auto& t : tokens) t = static_cast<int32_t>(rng.below(c.vocab_size));
  for (auto& t : targets) t = static_cast<int32_t>(rng.below(c.vocab_size));
  SpeedResult r;
  for (int64_t i = 0; i < o.warmup_steps + o.steps; ++i) {
    const auto t0 = Clock::now();
    if (o.forward_only) {
      m.forward(tokens.data(), targets.data(), o.batch, o.seq);
    } else {
      m.zero_grads();
      m.forward(tokens.data(), targets.data(), o.batch, o.seq);
      m.backward();
      if (o.optimizer) opt.step(m.params(), m.grads(), 1e-4);
    }
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (i >= o.warmup_steps) r.step_ms.push_back(ms);
  }
  std::vector<double> sorted = r.step_ms;
  std::sort(sorted.begin(), sorted.end());
  r.median_ms = sorted[sorted.size() / 2];
  r.min_ms = sorted.front();
  r.max_ms = sorted.back();
  r.tokens_per_s = static_cast<double>(o.batch * o.seq) / (r.median_ms / 1e3);
  r.flops_per_step = step_flops(c, o.batch, o.seq, o.forward_only);
  r.gflops = r.flops_per_step / (r.median_ms / 1e3) / 1e9;
  r.peak_rss_bytes = peak_rss_bytes();
  return r;
}

double measure_sgemm_gflops(int64_t n, int reps) {
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  double best = 0;
  for (int i = 0; i < reps + 1; ++i) {
    const auto t0 = Clock::now();
    kernels::matmul(c.data(), a.data(), b.data(), kernels::MatmulShape{.M = n, .N = n, .K = n});
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (i > 0) best = std::max(best, 2.0 * n * n * n / s / 1e9);  // the first run creates the primitive
  }
  return best;
}

}  // namespace gatedlm::bench
