// gatedlm eval: loss, perplexity and bits per byte of a checkpoint on held-out text.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "core/error.h"
#include "eval/evaluate.h"
#include "io/checkpoint.h"
#include "io/token_dataset.h"
#include "io/tokenizer.h"

namespace gatedlm::cli {

void register_eval(CLI::App& app) {
  struct Options {
    std::string checkpoint, data, text, tokenizer, split = "val";
    int64_t seq_len = 0, max_tokens = 0, batch_size = 8;
    bool json = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "eval",
      "Held-out loss (nats/token), perplexity and bits per byte, over non-overlapping BOS-prefixed windows.");
  sub->add_option("--checkpoint", opt->checkpoint, "checkpoint directory, or a run directory (its latest)")
      ->required();
  auto* data = sub->add_option("--data", opt->data, "dataset directory (its validation split by default)");
  auto* text = sub->add_option("--text", opt->text, "a text file to evaluate on")->check(CLI::ExistingFile);
  sub->add_option("--tokenizer", opt->tokenizer, "with --text: tokenizer model file or `byte`");
  sub->add_option("--split", opt->split, "with --data: val or train")->capture_default_str();
  sub->add_option("--seq-len", opt->seq_len, "window length (default: the model's max_seq_len)");
  sub->add_option("--max-tokens", opt->max_tokens, "evaluate at most this many tokens (0 = all)");
  sub->add_option("--batch-size", opt->batch_size, "windows per forward pass")->capture_default_str();
  sub->add_flag("--json", opt->json, "print JSON {loss, ppl, bpb, tokens}");
  data->excludes(text);
  sub->callback([opt] {
    if (opt->data.empty() == opt->text.empty()) fail("eval: give --data DIR or --text FILE --tokenizer T");
    io::Checkpoint ck = io::load_checkpoint(opt->checkpoint);
    model::Model<float> m(ck.config);
    m.load_params(ck.params);
    std::vector<int32_t> stream;
    int32_t bos = 0;
    double bytes_per_token = 1.0;
    if (!opt->data.empty()) {
      const io::TokenDataset ds = io::TokenDataset::open(opt->data);
      if (ds.manifest().vocab_size > ck.config.vocab_size)
        fail(opt->data, ": its tokenizer has ", ds.manifest().vocab_size, " ids, the model only ",
             ck.config.vocab_size);
      stream = ds.load_split(opt->split);
      const io::SplitInfo& info = opt->split == "train" ? ds.manifest().train : ds.manifest().val;
      bos = ds.manifest().bos_id;
      bytes_per_token = static_cast<double>(info.bytes) / static_cast<double>(std::max<int64_t>(info.tokens, 1));
    } else {
      if (opt->tokenizer.empty()) fail("eval: --text needs --tokenizer FILE|byte");
      auto tok = io::Tokenizer::load(opt->tokenizer);
      if (tok->vocab_size() > ck.config.vocab_size)
        fail(opt->tokenizer, ": ", tok->vocab_size(), " ids, more than the model's vocab_size ",
             ck.config.vocab_size);
      std::ifstream in(opt->text, std::ios::binary);
      std::stringstream buf;
      buf << in.rdbuf();
      const std::string text = buf.str();
      stream = tok->encode(text);
      bos = tok->bos_id();
      bytes_per_token = static_cast<double>(text.size()) / static_cast<double>(std::max<size_t>(stream.size(), 1));
    }
    const int64_t seq = opt->seq_len > 0 ? opt->seq_len : ck.config.max_seq_len;
    const eval::EvalResult r = eval::evaluate(m, stream, bos, seq, opt->max_tokens, opt->batch_size, bytes_per_token);
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
