// gatedlm bench: engine-side speed measurements (bench/compare_pytorch.py drives them).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <numeric>
#include <nlohmann/json.hpp>

#include "bench/allreduce_speed.h"
#include "bench/bandwidth.h"
#include "bench/generate_speed.h"
#include "bench/train_speed.h"
#include "cli/commands.h"
#include "cli/infer_options.h"
#include "core/error.h"
#include "dist/communicator.h"
#include "io/model_loader.h"
#include "io/quantized_checkpoint.h"
#include "kernels/bf16_support.h"
#include "model/config.h"
#include "model/init.h"

namespace gatedlm::cli {
namespace {

// precision: "fp32" or "bf16"; bf16_path: "native" (bf16 units) or "emulated" (no bf16
// units here: same numerics, slower than fp32, not a bf16 speed).
nlohmann::json speed_json(const bench::SpeedResult& r, const model::ModelConfig& c, bool bf16) {
  nlohmann::json j{{"step_ms", r.step_ms},           {"median_ms", r.median_ms},
                   {"min_ms", r.min_ms},             {"max_ms", r.max_ms},
                   {"tokens_per_s", r.tokens_per_s}, {"flops_per_step", r.flops_per_step},
                   {"gflops", r.gflops},             {"peak_rss_bytes", r.peak_rss_bytes},
                   {"matmul_params", bench::matmul_params(c)}, {"precision", bf16 ? "bf16" : "fp32"}};
  if (bf16) j["bf16_path"] = kernels::bf16_path_name(kernels::bf16_path());
  if (c.has_moe())  // ms per step in the MoE blocks' parts (model/moe.h MoeTimes)
    j["moe_ms"] = {{"routing", r.moe_routing_ms}, {"permute", r.moe_permute_ms}, {"experts", r.moe_experts_ms},
                   {"shared", r.moe_shared_ms}};
  if (c.has_linear()) {  // ms per step in the Gated DeltaNet layers' parts (model/gated_deltanet.h)
    j["deltanet_ms"] = {{"products", r.deltanet_products_ms},
                        {"delta_rule", r.deltanet_delta_rule_ms},
                        {"elementwise", r.deltanet_elementwise_ms}};
    // the parts are means over the timed steps, so their share is of the mean step
    const double mean_ms = std::accumulate(r.step_ms.begin(), r.step_ms.end(), 0.0) / r.step_ms.size();
    j["delta_rule_share"] = r.deltanet_delta_rule_ms / mean_ms;
  }
  return j;
}

void warn_if_bf16_emulated(bool bf16) {
  if (!bf16) return;
  const std::string warning = kernels::bf16_emulation_warning("--bf16");
  if (!warning.empty()) std::fprintf(stderr, "%s\n", warning.c_str());
}

// bench train and bench gate: timed training steps of one config, or of the config
// without a gate and with the G1 gate side by side.
struct TrainSpeedOptions {
  std::string config;
  bench::SpeedOptions speed;
};

void add_speed_options(CLI::App* sub, TrainSpeedOptions& o, const char* steps_help, const char* warmup_help) {
  sub->add_option("--batch-size", o.speed.batch, "sequences per step")->capture_default_str();
  sub->add_option("--seq-len", o.speed.seq, "tokens per sequence")->capture_default_str();
  sub->add_option("--steps", o.speed.steps, steps_help)->capture_default_str();
  sub->add_option("--warmup-steps", o.speed.warmup_steps, warmup_help)->capture_default_str();
  sub->add_flag("--bf16", o.speed.bf16, "bf16 matrix products (mixed precision, fp32 master weights)");
}

void run_bench_train(const TrainSpeedOptions& o) {
  const model::ModelConfig c = model::load_config(o.config);
  warn_if_bf16_emulated(o.speed.bf16);
  std::printf("%s\n", speed_json(bench::measure_training_speed(c, o.speed), c, o.speed.bf16).dump().c_str());
}

void add_bench_train(CLI::App* bench) {
  auto opt = std::make_shared<TrainSpeedOptions>();
  CLI::App* train = bench->add_subcommand(
      "train", "Time training (or forward-only) steps on a fixed random batch; prints JSON: step_ms, median_ms, "
               "min_ms, max_ms, tokens_per_s, flops_per_step, gflops, peak_rss_bytes.");
  train->add_option("--config", opt->config, "model config JSON")->required()->check(CLI::ExistingFile);
  add_speed_options(train, *opt, "timed steps", "untimed steps first");
  train->add_flag("--forward-only", opt->speed.forward_only, "time the forward pass only (evaluation, prefill)");
  train->callback([opt] { run_bench_train(*opt); });
}

void run_bench_gate(const TrainSpeedOptions& o) {
  model::ModelConfig base = model::load_config(o.config);
  base.gate = model::GateConfig{};
  model::ModelConfig gated = base;
  gated.gate.position = model::GatePosition::sdpa;  // defaults: elementwise, head-specific, sigmoid, multiply
  gated.validate();
  warn_if_bf16_emulated(o.speed.bf16);
  const bench::PairedSpeed p = bench::measure_paired_speed(base, gated, o.speed);
  const nlohmann::json j{{"baseline", speed_json(p.a, base, o.speed.bf16)},
                         {"gated", speed_json(p.b, gated, o.speed.bf16)},
                         {"step_ratios", p.ratios},
                         {"median_ratio", p.median_ratio},
                         {"flop_ratio", p.b.flops_per_step / p.a.flops_per_step}};
  std::printf("%s\n", j.dump().c_str());
}

void add_bench_gate(CLI::App* bench) {
  auto opt = std::make_shared<TrainSpeedOptions>();
  CLI::App* gate = bench->add_subcommand(
      "gate", "The G1 gate's cost: the config without a gate and with the elementwise sigmoid gate after SDPA "
              "(same dimensions), trained side by side in this process, steps interleaved; prints JSON: baseline "
              "and gated (as bench train), step_ratios (gated / baseline, step by step), median_ratio, flop_ratio.");
  gate->add_option("--config", opt->config, "model config JSON (its own gate, if any, is replaced)")
      ->required()
      ->check(CLI::ExistingFile);
  add_speed_options(gate, *opt, "timed steps of each model", "untimed steps of each first");
  gate->callback([opt] { run_bench_gate(*opt); });
}

struct GenerateBenchOptions {
  std::string config, checkpoint, weights = "f32";
  std::vector<int64_t> batches{1, 8};
  bench::GenerateSpeedOptions speed;
  double bandwidth_gbs = 0;  // the read bound to report shares of; 0: measured here
};

// The model of --config (random weights, seed 1, quantised in memory to --weights) or of
// --checkpoint (any model io/model_loader.h loads).
io::LoadedModel generate_bench_model(const GenerateBenchOptions& o) {
  if (o.config.empty() == o.checkpoint.empty()) fail("bench generate: give --config or --checkpoint");
  if (!o.checkpoint.empty()) {
    if (o.weights != "f32") fail("--weights ", o.weights, ": goes with --config (a checkpoint has its own format)");
    return io::load_model(o.checkpoint);
  }
  io::LoadedModel out;
  const model::ModelConfig c = model::load_config(o.config);
  out.model = std::make_unique<model::Model<float>>(c);
  std::vector<float> params;
  model::init_params(params, out.model->layout(), c, 1);
  out.model->load_params(params);
  if (o.weights != "f32")
    out.quantized = model::quantize_model(*out.model, io::parse_quant_format(o.weights, "--weights"), true);
  return out;
}

void run_bench_generate(const GenerateBenchOptions& o) {
  // The read bound first, its 1 GiB buffer given back before the model loads, and the peak
  // resident size reset after it: peak_rss_bytes is then the model's run, not the buffer's.
  const double bound_gbs =
      o.bandwidth_gbs > 0 ? o.bandwidth_gbs : bench::measure_read_bandwidth(int64_t{1} << 30, 5, 0).best_gbs;
  bench::reset_peak_rss();
  const io::LoadedModel loaded = generate_bench_model(o);
  model::Model<float>& m = *loaded.model;
  // Each decode step reads the weights once for the whole batch: its bytes per second are
  // steps/s * decode_bytes_per_token, a share of the machine's read bound.
  const int64_t step_bytes = bench::decode_bytes_per_token(m, loaded.quantized.get());
  nlohmann::json runs = nlohmann::json::array(), state_bytes = nlohmann::json::object();
  for (int64_t b : o.batches) {
    const bench::GenerateSpeed r = bench::measure_generate_speed(m, b, o.speed);
    for (auto [tokens, bytes] : r.state_bytes_per_sequence) state_bytes[std::to_string(tokens)] = bytes;
    // With the state: the weights once a step, and each sequence's KV rows and recurrent state.
    const double steps_per_s = r.decode_tokens_per_s / static_cast<double>(b);
    const double read_gbs = steps_per_s * static_cast<double>(step_bytes) / 1e9;
    const double state_read_gbs = steps_per_s * static_cast<double>(b * r.decode_state_bytes_per_step) / 1e9;
    runs.push_back({{"batch", b},
                    {"decode_read_gbs", read_gbs},
                    {"decode_read_share", read_gbs / bound_gbs},
                    {"decode_state_bytes_per_sequence", r.decode_state_bytes_per_step},
                    {"decode_read_gbs_with_state", read_gbs + state_read_gbs},
                    {"decode_read_share_with_state", (read_gbs + state_read_gbs) / bound_gbs},
                    {"prefill_tokens_per_s", r.prefill_tokens_per_s},
                    {"decode_tokens_per_s", r.decode_tokens_per_s},
                    {"prefill_ms", r.prefill_ms},
                    {"decode_ms_per_step", r.decode_ms_per_step},
                    {"prefill_ms_reps", r.prefill_ms_reps},
                    {"decode_ms_reps", r.decode_ms_reps},
                    {"packed_weight_bytes", r.packed_weight_bytes}});
  }
  const nlohmann::json j{{"prompt_tokens", o.speed.prompt_tokens},
                         {"new_tokens", o.speed.new_tokens},
                         {"params", m.layout().total()},
                         {"weights", loaded.weight_format()},
                         {"kv_type", kernels::element_name(o.speed.kv_type)},
                         {"quantized_weight_bytes", loaded.quantized ? loaded.quantized->bytes() : 0},
                         {"decode_bytes_per_token", step_bytes},
                         {"bandwidth_gbs", bound_gbs},
                         {"runs", runs},
                         {"state_bytes_per_sequence", state_bytes},
                         {"peak_rss_bytes", bench::peak_rss_bytes()}};
  std::printf("%s\n", j.dump().c_str());
}

void add_bench_generate(CLI::App* bench) {
  auto gen = std::make_shared<GenerateBenchOptions>();
  CLI::App* generate = bench->add_subcommand(
      "generate", "Prefill and decode tokens/s over the KV cache at each batch size (random prompts, greedy); prints "
                  "JSON: per batch, prefill_tokens_per_s, decode_tokens_per_s (aggregate), prefill_ms, "
                  "decode_ms_per_step, the per-rep times and packed_weight_bytes; the decode state per sequence at 1k, 8k and "
                  "32k tokens (state_bytes_per_sequence: KV cache of the softmax layers plus a hybrid's recurrent "
                  "state); decode_bytes_per_token (the weights a batch-1 step reads), bandwidth_gbs (the machine's "
                  "read bound, `bench bandwidth`) and per batch decode_read_gbs and decode_read_share (the decode "
                  "steps' weight reads per second, and their share of the bound), "
                  "decode_state_bytes_per_sequence (the KV rows and recurrent state a sequence's step reads, mean "
                  "over the steps) and decode_read_gbs_with_state, decode_read_share_with_state (weights and "
                  "every sequence's state); peak_rss_bytes (the peak resident "
                  "memory from the model's load on: the bound's 1 GiB buffer, measured first, is left out).");
  auto* gcfg = generate->add_option("--config", gen->config, "model config JSON (random weights)")->check(CLI::ExistingFile);
  auto* gck = generate->add_option("--checkpoint", gen->checkpoint, kModelPathHelp);
  gcfg->excludes(gck);
  generate->add_option("--weights", gen->weights,
                       "with --config: f32, or the random weights quantised in memory to bf16 | q8_0 | q4_0 "
                       "(as `gatedlm quantize` would)")
      ->capture_default_str();
  generate->add_option("--batch", gen->batches, "batch sizes, comma separated")->delimiter(',')->capture_default_str();
  generate->add_option("--prompt-tokens", gen->speed.prompt_tokens, "tokens per prompt")->capture_default_str();
  generate->add_option("--new-tokens", gen->speed.new_tokens, "decode steps")->capture_default_str();
  generate->add_option("--reps", gen->speed.reps, "timed repetitions (after one warm-up)")->capture_default_str();
  generate->add_option("--bandwidth-gbs", gen->bandwidth_gbs,
                       "the read bound for decode_read_share, in GB/s (default: measured, as `bench bandwidth` at "
                       "OMP_NUM_THREADS)")
      ->check(CLI::PositiveNumber);
  generate->add_flag("!--no-packed-weights", gen->speed.packed_weights,
                     "decode batches of more than 4 multiply by the plain weights (no packed copies)");
  add_kv_type_option(generate, gen->speed.kv_type);
  generate->callback([gen] { run_bench_generate(*gen); });
}

void add_bench_bandwidth(CLI::App* bench) {
  struct BandwidthOptions {
    int64_t size_mib = 1024;
    int reps = 10, threads = 0;
  };
  auto opt = std::make_shared<BandwidthOptions>();
  CLI::App* bw = bench->add_subcommand(
      "bandwidth", "The machine's streaming read bound: a buffer read end to end by vectorised loads on each thread "
                   "(the bound batch-1 decode is held to), in three patterns alternated (each thread's share front to "
                   "back; in four parts side by side with software prefetches, faster on some CPUs; and front to back "
                   "with software prefetches, the order in which the decode kernels read a product's share). Prints "
                   "JSON: bytes, threads, best_gbs, median_gbs (1e9 bytes/s over the passes; the best pattern's), "
                   "one_stream_best_gbs, four_streams_best_gbs, one_stream_prefetched_best_gbs.");
  bw->add_option("--size-mib", opt->size_mib, "buffer size in MiB (far above the caches)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  bw->add_option("--reps", opt->reps, "timed passes (after one warm-up)")->check(CLI::Range(1, 1000))->capture_default_str();
  bw->add_option("--threads", opt->threads, "threads (default: OMP_NUM_THREADS, else every core)")
      ->check(CLI::Range(1, 4096));
  bw->callback([opt] {
    const bench::BandwidthResult r = bench::measure_read_bandwidth(opt->size_mib << 20, opt->reps, opt->threads);
    std::printf("%s\n", nlohmann::json{{"bytes", r.bytes},
                                        {"threads", r.threads},
                                        {"best_gbs", r.best_gbs},
                                        {"median_gbs", r.median_gbs},
                                        {"one_stream_best_gbs", r.pattern_best_gbs[0]},
                                        {"four_streams_best_gbs", r.pattern_best_gbs[1]},
                                        {"one_stream_prefetched_best_gbs", r.pattern_best_gbs[2]}}
                            .dump()
                            .c_str());
  });
}

void add_bench_sgemm(CLI::App* bench) {
  struct SgemmOptions {
    int64_t n = 2048;
    int reps = 5;
  };
  auto opt = std::make_shared<SgemmOptions>();
  CLI::App* sgemm = bench->add_subcommand("sgemm", "GFLOP/s of a large oneDNN fp32 matrix product (prints JSON).");
  sgemm->add_option("--n", opt->n, "matrix size")->capture_default_str();
  sgemm->add_option("--reps", opt->reps, "repetitions (best is reported)")->capture_default_str();
  sgemm->callback([opt] {
    std::printf("%s\n",
                nlohmann::json{{"n", opt->n}, {"gflops", bench::measure_sgemm_gflops(opt->n, opt->reps)}}.dump().c_str());
  });
}

struct AllreduceBenchOptions {
  std::vector<double> mb{1, 4, 16, 64};
  int reps = 5;
};

void run_bench_allreduce(const AllreduceBenchOptions& o) {
  std::unique_ptr<dist::Communicator> comm = dist::from_environment();
  std::vector<int64_t> sizes;
  for (double mb : o.mb) sizes.push_back(static_cast<int64_t>(mb * (1 << 20)));
  for (const bench::AllreduceTiming& t : bench::measure_allreduce(*comm, sizes, o.reps))
    if (comm->rank() == 0)
      std::printf("%s\n", nlohmann::json{{"bytes", t.bytes},         {"median_s", t.median_s},
                                          {"min_s", t.min_s},         {"algbw_gbs", t.algbw_gbs},
                                          {"busbw_gbs", t.busbw_gbs}, {"correct", t.correct},
                                          {"ranks", comm->size()},    {"mpi", comm->describe()}}
                               .dump()
                               .c_str());
}

void add_bench_allreduce(CLI::App* bench) {
  auto opt = std::make_shared<AllreduceBenchOptions>();
  CLI::App* allreduce = bench->add_subcommand(
      "allreduce", "The gradient allreduce (float64 sum in rank order, as training does) over the ranks of this job: "
                   "run it under `mpirun -np N`. Prints one JSON line per size from rank 0: bytes, median_s, min_s, "
                   "algbw_gbs (bytes / time), busbw_gbs (x 2(N-1)/N, per link), correct, ranks.");
  allreduce->add_option("--mb", opt->mb, "buffer sizes in MiB")->capture_default_str();
  allreduce->add_option("--reps", opt->reps, "timed repetitions per size (median reported)")->capture_default_str();
  allreduce->callback([opt] { run_bench_allreduce(*opt); });
}

}  // namespace

void register_bench(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Speed measurements: training steps, the gate's cost, generation, the sgemm peak and the read bound.");
  bench->require_subcommand(1);
  add_bench_train(bench);
  add_bench_gate(bench);
  add_bench_generate(bench);
  add_bench_sgemm(bench);
  add_bench_bandwidth(bench);
  add_bench_allreduce(bench);
}

}  // namespace gatedlm::cli
