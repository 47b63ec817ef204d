// gatedlm import: a Hugging Face model directory (the paper's released checkpoints, Qwen3)
// to a gatedlm checkpoint.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "core/error.h"
#include "io/hf_convert.h"
#include "io/tokenizer_json.h"

namespace gatedlm::cli {

namespace fs = std::filesystem;

void register_import(CLI::App& app) {
  struct Options {
    std::string src, out, format = "auto";
  };
  auto opt = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "import",
      "Convert a Hugging Face model directory (config.json + model.safetensors or a sharded "
      "model.safetensors.index.json; F32, BF16 or F16) into a gatedlm checkpoint. Formats: paper (the "
      "gated-attention paper's checkpoints, gate rows inside q_proj) and qwen3 (transformers' Qwen3). "
      "Anything gatedlm cannot represent is refused by name and nothing is written: unknown or duplicate config "
      "keys, missing tensors (found from the safetensors headers), NaN or Inf weights (naming tensor and element). "
      "A tokenizer.json beside the weights is loaded and checked, then copied into the checkpoint. Weights are "
      "stored as F32.");
  sub->add_option("SRC_DIR", opt->src, "the Hugging Face model directory")->required();
  sub->add_option("--out", opt->out, "checkpoint directory to create (must not exist or be empty)")->required();
  sub->add_option("--format", opt->format, "auto | paper | qwen3 (auto: paper when the config has the paper's keys)")
      ->capture_default_str();
  sub->callback([opt] {
    std::optional<io::HfFormat> format;
    if (opt->format != "auto") format = io::parse_hf_format(opt->format);
    if (fs::exists(opt->out) && !(fs::is_directory(opt->out) && fs::is_empty(opt->out)))
      fail("--out ", opt->out, ": exists and is not an empty directory (nothing written)");
    io::ImportedModel m = io::import_hf(opt->src, format);
    // The tokenizer is loaded (every check of load_tokenizer_json) before anything is written.
    const fs::path tokenizer = fs::path(opt->src) / io::kHfTokenizerFile;
    if (fs::exists(tokenizer)) {
      const std::unique_ptr<io::Tokenizer> t = io::load_tokenizer_json(tokenizer.string());
      if (t->vocab_size() > m.checkpoint.config.vocab_size)
        fail(tokenizer.string(), ": the tokenizer has ", t->vocab_size(), " ids, more than the model's vocab_size ",
             m.checkpoint.config.vocab_size, " (nothing written)");
    }
    io::save_checkpoint(opt->out, m.checkpoint.config, m.checkpoint.params);
    if (fs::exists(tokenizer)) fs::copy_file(tokenizer, fs::path(opt->out) / io::kHfTokenizerFile);
    std::fprintf(stderr, "imported %s (format %s, %s, %lld parameters) into %s%s\n", m.weights_source.c_str(),
                 io::to_string(m.format).c_str(), model::describe_gate(m.checkpoint.config).c_str(),
                 static_cast<long long>(m.checkpoint.params.size()), opt->out.c_str(),
                 fs::exists(tokenizer) ? " with its tokenizer.json" : "");
  });
}

}  // namespace gatedlm::cli
