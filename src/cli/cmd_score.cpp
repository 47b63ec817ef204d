// gatedlm score: next-token cross-entropy of given token ids under a checkpoint.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/error.h"
#include "io/checkpoint.h"
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
  sub->add_option("--checkpoint", opt->checkpoint, "checkpoint directory")->required();
  sub->add_option("--token-ids", opt->token_ids, "text file of token ids")->required()->check(CLI::ExistingFile);
  sub->add_flag("--logprobs", opt->logprobs, "also print each predicted token's log-probability");
  sub->add_flag("--json", opt->json, "print JSON {tokens, mean_loss, logprobs}");
  sub->callback([opt] {
    // Weights read straight into the model: one copy in memory.
    model::Model<float> m(io::load_checkpoint_config(opt->checkpoint));
    io::load_checkpoint_weights(opt->checkpoint, m.config(), m.params());
    const auto sequences = io::read_token_ids(
        opt->token_ids, io::TokenIdLimits{m.config().vocab_size, m.config().max_seq_len, 2, "max_seq_len"});
    double total = 0.0;
    int64_t tokens = 0;
    std::vector<std::vector<double>> logprobs;
    for (const auto& seq : sequences) {
      const int64_t len = static_cast<int64_t>(seq.size());
      std::vector<int32_t> targets(len, -1);
      for (int64_t t = 0; t + 1 < len; ++t) targets[t] = seq[t + 1];
      m.forward(seq.data(), targets.data(), 1, len);
      std::vector<double> lp;
      for (int64_t t = 0; t + 1 < len; ++t) {
        total += m.token_losses()[t];
        lp.push_back(-static_cast<double>(m.token_losses()[t]));
      }
      tokens += len - 1;
      logprobs.push_back(std::move(lp));
    }
    const double mean = total / static_cast<double>(tokens);  // tokens > 0: every line has two ids or more
    if (!std::isfinite(mean))
      fail("the mean loss over ", opt->token_ids, " is ", mean, " (non-finite): the checkpoint ", opt->checkpoint,
           " gives NaN or Inf logits");
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
