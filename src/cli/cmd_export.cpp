// gatedlm export: a gatedlm checkpoint to a Hugging Face model directory (the paper's
// layout or Qwen3).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "core/error.h"
#include "io/hf_convert.h"

namespace gatedlm::cli {

namespace fs = std::filesystem;

void register_export(CLI::App& app) {
  struct Options {
    std::string checkpoint, out, format, dtype = "f32";
  };
  auto opt = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "export",
      "Write a checkpoint as a Hugging Face model directory: config.json + model.safetensors. paper: the "
      "gated-attention paper's layout (a G1 sigmoid gate, elementwise or headwise, fused into q_proj; load it "
      "with the authors' modeling_qwen3.py); qwen3: transformers' Qwen3 (ungated models). A config the format "
      "cannot express is refused by key before anything is written.");
  sub->add_option("CKPT", opt->checkpoint, "checkpoint or run directory")->required();
  sub->add_option("--format", opt->format, "paper | qwen3")->required();
  sub->add_option("--out", opt->out, "output directory (must not exist or be empty)")->required();
  sub->add_option("--dtype", opt->dtype, "f32 | bf16 | f16 (round to nearest even)")->capture_default_str();
  sub->callback([opt] {
    const io::HfFormat format = io::parse_hf_format(opt->format);
    const io::StoreDtype dtype = io::parse_store_dtype(opt->dtype);
    if (fs::exists(opt->out) && !(fs::is_directory(opt->out) && fs::is_empty(opt->out)))
      fail("--out ", opt->out, ": exists and is not an empty directory (nothing written)");
    const std::string dir = io::resolve_checkpoint_dir(opt->checkpoint);
    const io::Checkpoint ck = io::load_checkpoint(dir);
    io::export_hf(ck, format, dtype, opt->out);
    const fs::path tokenizer = fs::path(dir) / io::kHfTokenizerFile;
    if (fs::exists(tokenizer)) fs::copy_file(tokenizer, fs::path(opt->out) / io::kHfTokenizerFile);
    std::fprintf(stderr, "exported %s as %s (%s) into %s\n", dir.c_str(), opt->format.c_str(), opt->dtype.c_str(),
                 opt->out.c_str());
  });
}

}  // namespace gatedlm::cli
