// gatedlm stream-eval: perplexity over a long text read through a streaming window (the
// last W tokens plus K attention sinks, StreamingLLM) for each K, and through the full
// cache for reference.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/infer_options.h"
#include "core/error.h"
#include "io/model_loader.h"
#include "infer/stream_eval.h"
#include "io/text_corpus.h"

namespace gatedlm::cli {

void register_stream_eval(CLI::App& app) {
  struct Options {
    std::string checkpoint, text, tokenizer;
    int64_t window = 0, tokens = 0;
    std::vector<int64_t> sinks{0, 1, 4};
    kernels::ElementType kv_type = kernels::ElementType::f32;
    bool json = false, skip_full = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "stream-eval",
      "Perplexity of a long text through a rolling KV cache of the last --window tokens plus the first K sink "
      "tokens, for each K of --sinks (positions inside the cache, as StreamingLLM), and through the full cache "
      "(dense attention) for reference. A model that needs attention sinks blows up at K = 0.");
  add_checkpoint_options(sub, opt->checkpoint, opt->tokenizer);
  sub->add_option("--text", opt->text, "UTF-8 text file to read")->required()->check(CLI::ExistingFile);
  sub->add_option("--window", opt->window, "recent tokens kept in the cache")->required();
  sub->add_option("--sinks", opt->sinks, "sink counts to compare, comma separated")->delimiter(',')->capture_default_str();
  sub->add_option("--tokens", opt->tokens, "predictions to score (the text must hold one token more)")->required();
  add_kv_type_option(sub, opt->kv_type);
  sub->add_flag("--skip-full", opt->skip_full, "leave out the full-cache reference (its cost grows with --tokens^2)");
  sub->add_flag("--json", opt->json, "print one JSON object instead of a table");
  sub->callback([opt] {
    if (opt->window < 1) fail("--window must be at least 1, got ", opt->window);
    if (opt->tokens < 1) fail("--tokens must be at least 1, got ", opt->tokens);
    for (int64_t k : opt->sinks)
      if (k < 0) fail("--sinks: ", k, " is negative");
    const io::LoadedModel lm = io::load_model(opt->checkpoint, io::ModelLoadOptions::reading_text(opt->tokenizer));
    std::vector<int32_t> ids{lm.tokenizer->bos_id()};
    for (int32_t t : lm.tokenizer->encode(io::read_text_file(opt->text))) ids.push_back(t);
    if (static_cast<int64_t>(ids.size()) < opt->tokens + 1)
      fail(opt->text, ": ", ids.size(), " tokens (BOS included), fewer than --tokens ", opt->tokens, " + 1");
    ids.resize(opt->tokens + 1);
    const int64_t train_len = lm.model->config().max_seq_len;
    std::vector<infer::StreamEvalResult> results;
    auto run = [&](int64_t window, int64_t sinks) {
      const std::string what = window > 0 ? "window " + std::to_string(window) + " sinks " + std::to_string(sinks)
                                          : std::string("full cache");
      results.push_back(infer::stream_eval(*lm.model, ids, window, sinks, opt->kv_type, [&](int64_t done, int64_t total) {
        std::fprintf(stderr, "stream-eval %s: %lld/%lld tokens\n", what.c_str(), static_cast<long long>(done),
                     static_cast<long long>(total));
      }));
    };
    for (int64_t k : opt->sinks) run(opt->window, k);
    if (!opt->skip_full) run(0, 0);
    nlohmann::json rows = nlohmann::json::array();
    for (const infer::StreamEvalResult& r : results)
      rows.push_back({{"cache", r.window > 0 ? "window" : "full"},
                      {"window", r.window},
                      {"sinks", r.sinks},
                      {"tokens", r.scored},
                      {"ppl", std::exp(r.nll)},
                      {"nll", r.nll},
                      {"tokens_after_fill", r.scored_after_fill},
                      {"ppl_after_fill", r.scored_after_fill ? nlohmann::json(std::exp(r.nll_after_fill)) : nlohmann::json()}});
    if (opt->json) {
      const nlohmann::json j{{"checkpoint", lm.checkpoint_dir}, {"text", opt->text}, {"tokenizer", lm.tokenizer_source},
                             {"train_len", train_len},           {"tokens", opt->tokens}, {"results", rows},
                             {"kv_type", kernels::element_name(opt->kv_type)}};
      std::printf("%s\n", j.dump().c_str());
      return;
    }
    std::printf("%lld tokens of %s (training length %lld)\n", static_cast<long long>(opt->tokens), opt->text.c_str(),
                static_cast<long long>(train_len));
    std::printf("%-8s %7s %6s %12s %16s\n", "cache", "window", "sinks", "ppl", "ppl after fill");
    for (const auto& r : rows) {
      const std::string after = r["ppl_after_fill"].is_null() ? "-" : std::to_string(r["ppl_after_fill"].get<double>());
      std::printf("%-8s %7lld %6lld %12.4f %16s\n", r["cache"].get<std::string>().c_str(),
                  static_cast<long long>(r["window"].get<int64_t>()), static_cast<long long>(r["sinks"].get<int64_t>()),
                  r["ppl"].get<double>(), after.c_str());
    }
  });
}

}  // namespace gatedlm::cli
