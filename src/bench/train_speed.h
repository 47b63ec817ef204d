#pragma once
// Training-speed measurement on a fixed random batch, in this process: the engine side of
// bench/compare_pytorch.py. FLOPs are counted with the formula
//   6 * matmul_params * tokens + 12 * n_layers * seq_len * d_attn * tokens
// (d_attn = n_heads * head_dim); forward-only counts one third of it.
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

namespace gatedlm::bench {

struct SpeedOptions {
  int64_t batch = 16, seq = 256, steps = 10, warmup_steps = 2;
  bool forward_only = false;
  bool optimizer = true;  // include the AdamW update in a training step
  bool bf16 = false;      // bf16 matrix products (mixed precision)
  uint64_t seed = 1;
};

struct SpeedResult {
  std::vector<double> step_ms;
  double median_ms = 0, min_ms = 0, max_ms = 0;
  double tokens_per_s = 0;   // at the median step time
  double flops_per_step = 0;
  double gflops = 0;         // at the median step time
  int64_t peak_rss_bytes = 0;
  // Mixture of experts: milliseconds per timed step in the MoE blocks' parts (model/moe.h
  // MoeTimes: routing, permutation, experts, shared expert), summed over layers.
  double moe_routing_ms = 0, moe_permute_ms = 0, moe_experts_ms = 0, moe_shared_ms = 0;
  // Hybrid models: milliseconds per timed step in the Gated DeltaNet layers' parts (model/
  // gated_deltanet.h DeltaNetTimes: in/out products, delta-rule kernels, elementwise), summed
  // over layers.
  double deltanet_products_ms = 0, deltanet_delta_rule_ms = 0, deltanet_elementwise_ms = 0;
};

int64_t matmul_params(const model::ModelConfig& c);  // every weight that enters a token's matrix products
                                                     // (of an MoE layer's experts, the top_k a token runs)
double step_flops(const model::ModelConfig& c, int64_t batch, int64_t seq, bool forward_only);
SpeedResult measure_training_speed(const model::ModelConfig& c, const SpeedOptions& o);

// Two models timed in one process with their steps interleaved (a step of one, then a
// step of the other), so that a busy moment of the machine hits both alike: the way to
// measure a small difference such as the gate's cost. ratios[i] = step i of b / step i of a.
struct PairedSpeed {
  SpeedResult a, b;
  std::vector<double> ratios;
  double median_ratio = 0;
};
PairedSpeed measure_paired_speed(const model::ModelConfig& a, const model::ModelConfig& b, const SpeedOptions& o);

// GFLOP/s of a large oneDNN sgemm (the machine's practical fp32 peak), best of `reps`.
double measure_sgemm_gflops(int64_t n, int reps);

int64_t peak_rss_bytes();
// Resets the peak that peak_rss_bytes() reads to the present resident size (Linux >= 4.0's
// /proc/self/clear_refs; a no-op where it cannot): a benchmark whose own scratch (bench
// generate's 1 GiB bandwidth buffer) would otherwise stand as the peak.
void reset_peak_rss();

}  // namespace gatedlm::bench
