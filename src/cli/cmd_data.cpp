// gatedlm data: tokenise text into a dataset directory (see docs/data-format.md), and
// check and summarise one.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>

#include "cli/commands.h"
#include "io/token_dataset.h"

namespace gatedlm::cli {
namespace {

void print_summary(const io::TokenDataset& ds) {
  const io::DatasetManifest& m = ds.manifest();
  std::printf("%s: tokenizer %s (vocabulary %lld, BOS %d, EOS %d)\n", ds.dir().c_str(), m.tokenizer.c_str(),
              static_cast<long long>(m.vocab_size), m.bos_id, m.eos_id);
  for (const auto& [name, s] : {std::pair{"train", &m.train}, std::pair{"val", &m.val}}) {
    std::printf("  %-5s %12lld tokens  %12lld bytes  %6lld documents  (%.3f bytes/token)\n", name,
                static_cast<long long>(s->tokens), static_cast<long long>(s->bytes),
                static_cast<long long>(s->documents),
                s->tokens > 2 * s->documents
                    ? static_cast<double>(s->bytes) / static_cast<double>(s->tokens - 2 * s->documents)
                    : 0.0);
  }
}

}  // namespace

void register_data(CLI::App& app) {
  CLI::App* data = app.add_subcommand("data", "Prepare tokenised datasets and inspect them.");
  data->require_subcommand(1);

  struct PrepareArgs {
    io::PrepareOptions prepare;
    bool force = false;
  };
  auto opt = std::make_shared<PrepareArgs>();
  CLI::App* prepare = data->add_subcommand(
      "prepare",
      "Tokenise text files into DIR: train.bin and val.bin shards and manifest.json. Each file is one document; "
      "the last --val-fraction of each file's bytes (cut at a newline near there) goes to validation.");
  prepare->add_option("--tokenizer", opt->prepare.tokenizer, "a SentencePiece .model file, or \"byte\"")->required();
  prepare->add_option("--input", opt->prepare.inputs, "text files or directories (read recursively, sorted)")
      ->required()
      ->expected(1, -1);
  prepare->add_option("--out", opt->prepare.out, "the dataset directory to write")->required();
  prepare->add_option("--val-fraction", opt->prepare.val_fraction, "fraction of each file held out, in [0, 1)")
      ->capture_default_str();
  prepare->add_flag("--force", opt->force, "replace a dataset already in --out");
  prepare->callback([opt] {
    const auto start = std::chrono::steady_clock::now();
    opt->prepare.force = opt->force;
    io::prepare_dataset(opt->prepare);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    print_summary(io::TokenDataset::open(opt->prepare.out));
    std::printf("prepared in %.1f s\n", seconds);
  });

  auto dir = std::make_shared<std::string>();
  CLI::App* info = data->add_subcommand("info", "Check a prepared dataset (manifest, shards, ids) and summarise it.");
  info->add_option("dir", *dir, "the dataset directory")->required();
  info->callback([dir] { print_summary(io::TokenDataset::open(*dir)); });
}

}  // namespace gatedlm::cli
