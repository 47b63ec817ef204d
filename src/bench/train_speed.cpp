#include "bench/train_speed.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>

#include "bench/median.h"
#include "core/error.h"
#include "core/rng.h"
#include "kernels/matmul.h"
#include "model/init.h"
#include "model/model.h"
#include "model/param_layout.h"
#include "model/switch_heads.h"
#include "train/optimizer.h"

namespace gatedlm::bench {

using Clock = std::chrono::steady_clock;

int64_t matmul_params(const model::ModelConfig& c) {
  const model::ParamLayout layout(c);
  int64_t n = 0;
  for (const auto& s : layout.specs()) {
    const bool matrix = s.kind == model::ParamKind::matrix || s.kind == model::ParamKind::lm_head ||
                        s.kind == model::ParamKind::switch_router ||
                        (s.kind == model::ParamKind::gate && s.shape.size() == 2);
    if (matrix) n += s.numel;
  }
  const model::SwitchHeadsCounts sw = model::switch_heads_counts(c);
  n -= sw.experts - sw.experts_active;  // a token runs top_k of the n_experts switch-head experts
  if (c.tie_embeddings) n += c.vocab_size * c.d_model;  // the tied LM head is still a product
  // A token runs top_k of each MoE layer's n_experts routed experts.
  n -= c.moe.moe_layers(c.n_layers) * (c.moe.n_experts - c.moe.top_k) * c.moe.expert_params(c.d_model);
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

void reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
}

namespace {

// One model, its optimizer and a fixed random batch; step() runs and times one step.
class StepTimer {
 public:
  StepTimer(const model::ModelConfig& c, const SpeedOptions& o)
      : c_(c), o_(o), m_(c), opt_(m_.layout(), train::AdamWConfig{}) {
    std::vector<float> w;
    model::init_params(w, m_.layout(), c, o.seed);
    m_.load_params(w);
    m_.set_bf16_matmuls(o.bf16);
    Rng rng(o.seed);
    tokens_.resize(o.batch * o.seq);
    targets_.resize(o.batch * o.seq);
    for (auto& t : tokens_) t = static_cast<int32_t>(rng.below(c.vocab_size));
    for (auto& t : targets_) t = static_cast<int32_t>(rng.below(c.vocab_size));
  }
  double step_ms() {
    const auto t0 = Clock::now();
    if (o_.forward_only) {
      m_.forward(tokens_.data(), targets_.data(), o_.batch, o_.seq);
    } else {
      m_.zero_grads();
      m_.forward(tokens_.data(), targets_.data(), o_.batch, o_.seq);
      m_.backward();
      if (o_.optimizer) opt_.step(m_.params(), m_.grads(), 1e-4);
    }
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  }
  void reset_part_times() {
    m_.moe_times(/*reset=*/true);
    m_.deltanet_times(/*reset=*/true);
  }
  // The MoE and Gated DeltaNet parts' milliseconds per step over `steps` steps since the
  // last reset.
  void add_part_times(SpeedResult& r, int64_t steps) {
    const model::MoeTimes t = m_.moe_times();
    const double per = 1e3 / static_cast<double>(steps);
    r.moe_routing_ms = t.routing * per;
    r.moe_permute_ms = t.permute * per;
    r.moe_experts_ms = t.experts * per;
    r.moe_shared_ms = t.shared * per;
    const model::DeltaNetTimes d = m_.deltanet_times();
    r.deltanet_products_ms = d.products * per;
    r.deltanet_delta_rule_ms = d.delta_rule * per;
    r.deltanet_elementwise_ms = d.elementwise * per;
  }
  // Median/min/max, throughput and FLOPs of the timed steps.
  SpeedResult result(std::vector<double> step_ms) const {
    SpeedResult r;
    r.step_ms = std::move(step_ms);
    std::vector<double> sorted = r.step_ms;
    std::sort(sorted.begin(), sorted.end());
    r.median_ms = sorted[sorted.size() / 2];
    r.min_ms = sorted.front();
    r.max_ms = sorted.back();
    r.tokens_per_s = static_cast<double>(o_.batch * o_.seq) / (r.median_ms / 1e3);
    r.flops_per_step = step_flops(c_, o_.batch, o_.seq, o_.forward_only);
    r.gflops = r.flops_per_step / (r.median_ms / 1e3) / 1e9;
    r.peak_rss_bytes = peak_rss_bytes();
    return r;
  }

 private:
  model::ModelConfig c_;
  SpeedOptions o_;
  model::Model<float> m_;
  train::AdamW<float> opt_;
  std::vector<int32_t> tokens_, targets_;
};

}  // namespace

SpeedResult measure_training_speed(const model::ModelConfig& c, const SpeedOptions& o) {
  if (o.steps < 1) fail("bench: --steps must be at least 1");
  StepTimer timer(c, o);
  std::vector<double> ms;
  for (int64_t i = 0; i < o.warmup_steps + o.steps; ++i) {
    if (i == o.warmup_steps) timer.reset_part_times();
    const double t = timer.step_ms();
    if (i >= o.warmup_steps) ms.push_back(t);
  }
  SpeedResult r = timer.result(std::move(ms));
  timer.add_part_times(r, o.steps);
  return r;
}

PairedSpeed measure_paired_speed(const model::ModelConfig& a, const model::ModelConfig& b, const SpeedOptions& o) {
  if (o.steps < 1) fail("bench: --steps must be at least 1");
  StepTimer ta(a, o), tb(b, o);
  std::vector<double> ms_a, ms_b;
  for (int64_t i = 0; i < o.warmup_steps + o.steps; ++i) {
    const double sa = ta.step_ms(), sb = tb.step_ms();
    if (i < o.warmup_steps) continue;
    ms_a.push_back(sa);
    ms_b.push_back(sb);
  }
  PairedSpeed p;
  for (size_t i = 0; i < ms_a.size(); ++i) p.ratios.push_back(ms_b[i] / ms_a[i]);
  p.median_ratio = median(p.ratios);
  p.a = ta.result(std::move(ms_a));
  p.b = tb.result(std::move(ms_b));
  return p;
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
