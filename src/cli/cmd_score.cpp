// gatedlm score: next-token cross-entropy of given token ids under a checkpoint.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/infer_options.h"
#include "core/error.h"
#include "eval/score.h"
#include "io/model_loader.h"
#include "io/token_ids.h"
#include "model/model.h"

namespace gatedlm::cli {

void register_score(CLI::App& app) {
  struct Options {
    std::string checkpoint, token_ids;
    bool logprobs = false, json = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "score",
      "Mean next-token cross-entropy (nats) of token-id sequences: one sequence per line, "
      "whitespace-separated ids used exactly as given. Each sequence is scored on its own.");
  sub->add_option("--checkpoint", opt->checkpoint, kModelPathHelp)->required();
  sub->add_option("--token-ids", opt->token_ids, "text file of token ids")->required()->check(CLI::ExistingFile);
  sub->add_flag("--logprobs", opt->logprobs, "also print each predicted token's log-probability");
  sub->add_flag("--json", opt->json, "print JSON {tokens, mean_loss, logprobs}");
  sub->callback([opt] {
    const io::LoadedModel loaded = io::load_model(opt->checkpoint);
    model::Model<float>& m = *loaded.model;
    const auto sequences = io::read_token_ids(
        opt->token_ids, io::TokenIdLimits{m.config().vocab_size, m.config().max_seq_len, 2, "max_seq_len"});
    const eval::ScoreResult r = eval::score_sequences(m, sequences, opt->token_ids, opt->checkpoint);
    const int64_t tokens = r.tokens;
    const double mean = r.mean_loss;
    const auto& logprobs = r.logprobs;
    if (opt->json) {
      nlohmann::json j{{"tokens", tokens}, {"mean_loss", mean}};
      if (opt->logprobs) j["logprobs"] = logprobs;
      std::printf("%s\n", j.dump().c_str());
      return;
    }
    std::printf("tokens     %lld\nmean_loss  %.6f nats\nppl        %.4f\n", static_cast<long long>(tokens), mean,
                std::exp(mean));
    if (opt->logprobs)
      for (size_t i = 0; i < logprobs.size(); ++i) {
        std::printf("sequence %zu:", i);
        for (double v : logprobs[i]) std::printf(" %.6f", v);
        std::printf("\n");
      }
  });
}

}  // namespace gatedlm::cli
