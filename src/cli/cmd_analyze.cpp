// gatedlm analyze: attention-sink, massive-activation and gate probes of a checkpoint over
// deterministic token windows, written as one JSON file (schema: docs/analysis.md).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "analysis/analyze.h"
#include "cli/commands.h"
#include "cli/infer_options.h"
#include "cli/number_checks.h"
#include "cli/eval_source_options.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "io/model_loader.h"
#include "io/eval_stream.h"
#include "model/model.h"

namespace gatedlm::cli {

void register_analyze(CLI::App& app) {
  struct Options {
    std::string checkpoint, out;
    std::vector<int64_t> map_layers;
    io::EvalSource source;
    int64_t sequences = 16, seq_len = 0, map_size = 64;
    uint64_t seed = 0;
    bool no_token_ids = false, quiet = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "analyze",
      "Probe a checkpoint for attention sinks (F-Attn, sink rate, attention maps), massive activations "
      "(top-3 |h|, M-Act) and gate statistics (score mean/histogram, sparsity, mean |Y|) over N windows of "
      "length L, each BOS + L-1 consecutive tokens from a seeded offset; writes JSON (docs/analysis.md).");
  sub->add_option("--checkpoint", opt->checkpoint, kModelPathHelp)->required();
  add_eval_source_options(sub, opt->source, "analyze", "to take windows from");
  sub->add_option("--sequences", opt->sequences, "number of windows N")->capture_default_str()->check(at_least(1));
  sub->add_option("--seq-len", opt->seq_len, "window length L incl. BOS (default min(256, max_seq_len))")
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 20));
  sub->add_option("--seed", opt->seed, "window sampling seed")->capture_default_str();
  sub->add_option("--map-layers", opt->map_layers, "layers whose head-averaged attention map is kept, e.g. 0,3 "
                                                    "(default: first and last)")
      ->delimiter(',');
  sub->add_option("--map-size", opt->map_size, "attention maps cover the first min(L, this) positions")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{64}));
  sub->add_flag("--no-token-ids", opt->no_token_ids, "leave the windows' token ids out of the JSON");
  sub->add_flag("--quiet", opt->quiet, "no progress on stderr");
  sub->add_option("--out", opt->out, "JSON file to write (atomically)")->required();
  sub->callback([opt] {
    const io::EvalSource& src = opt->source;
    io::check_eval_source(src);
    // A quantised model keeps the fp32 values of its matrices too, for probes that read them.
    io::ModelLoadOptions load;
    load.release_f32 = false;
    const io::LoadedModel loaded = io::load_model(opt->checkpoint, load);
    model::Model<float>& m = *loaded.model;
    const model::ModelConfig& c = m.config();
    const io::EvalStream es = io::load_eval_stream(src, c.vocab_size);

    const int64_t len = analysis::analysis_window_length(opt->seq_len, c.max_seq_len);
    analysis::AnalyzeOptions ao;
    ao.map_layers = opt->map_layers;
    ao.map_size = opt->map_size;
    ao.include_token_ids = !opt->no_token_ids;
    ao.checkpoint = opt->checkpoint;
    ao.source = es.record;
    ao.seed = opt->seed;
    const bool quiet = opt->quiet;
    if (!quiet)
      std::fprintf(stderr, "analyze: %s (%s), %lld windows of %lld tokens\n", opt->checkpoint.c_str(),
                   model::describe_gate(c).c_str(), static_cast<long long>(opt->sequences),
                   static_cast<long long>(len));
    const auto progress = [quiet](const char* phase, int64_t done, int64_t total) {
      if (!quiet) std::fprintf(stderr, "analyze: %s %lld/%lld\n", phase, static_cast<long long>(done),
                               static_cast<long long>(total));
    };
    const nlohmann::json j = analysis::analyze_stream(m, es.tokens, es.bos, opt->sequences, len, ao, progress);
    write_file_atomic(opt->out, j.dump(1) + "\n");
    if (!quiet)
      std::fprintf(stderr, "analyze: F-Attn %.4f (t>=1), sink rate %.1f%%, M-Act %.3g%s -> %s\n",
                   j["f_attn"]["mean"].get<double>(), j["sink_rate"]["percent"].get<double>(),
                   j["massive_activations"]["m_act"].get<double>(),
                   j["gates"].is_null()
                       ? ""
                       : cat(", gate score ", j["gates"]["mean_score"].get<double>()).c_str(),
                   opt->out.c_str());
  });
}

}  // namespace gatedlm::cli
