// gatedlm eval: loss, perplexity and bits per byte of a checkpoint on held-out text.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/infer_options.h"
#include "cli/eval_source_options.h"
#include "eval/evaluate.h"
#include "io/model_loader.h"
#include "io/eval_stream.h"

namespace gatedlm::cli {

void register_eval(CLI::App& app) {
  struct Options {
    std::string checkpoint;
    io::EvalSource source;
    int64_t seq_len = 0, max_tokens = 0, batch_size = 8;
    bool json = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "eval",
      "Held-out loss (nats/token), perplexity and bits per byte, over non-overlapping BOS-prefixed windows.");
  sub->add_option("--checkpoint", opt->checkpoint, kModelPathHelp)->required();
  add_eval_source_options(sub, opt->source, "eval", "to evaluate on");
  sub->add_option("--seq-len", opt->seq_len, "window length (default: the model's max_seq_len)");
  sub->add_option("--max-tokens", opt->max_tokens, "evaluate at most this many tokens (0 = all)");
  sub->add_option("--batch-size", opt->batch_size, "windows per forward pass")->capture_default_str();
  sub->add_flag("--json", opt->json, "print JSON {loss, ppl, bpb, tokens}");
  sub->callback([opt] {
    const io::EvalSource& src = opt->source;
    io::check_eval_source(src);
    const io::LoadedModel loaded = io::load_model(opt->checkpoint);
    model::Model<float>& m = *loaded.model;
    const io::EvalStream es = io::load_eval_stream(src, m.config().vocab_size);
    const int64_t seq = opt->seq_len > 0 ? opt->seq_len : m.config().max_seq_len;
    const eval::EvalResult r =
        eval::evaluate(m, es.tokens, es.bos, seq, opt->max_tokens, opt->batch_size, es.bytes_per_token);
    if (opt->json) {
      std::printf("%s\n",
                  nlohmann::json{{"loss", r.loss}, {"ppl", r.ppl}, {"bpb", r.bpb}, {"tokens", r.tokens}}.dump().c_str());
    } else {
      std::printf("tokens  %lld\nloss    %.4f nats/token\nppl     %.3f\nbpb     %.4f\n",
                  static_cast<long long>(r.tokens), r.loss, r.ppl, r.bpb);
    }
  });
}

}  // namespace gatedlm::cli
