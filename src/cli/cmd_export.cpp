// gatedlm export: a gatedlm checkpoint to a Hugging Face model directory (the paper's
// layout or Qwen3).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "core/error.h"
#include "io/chat_template_source.h"
#include "io/gguf.h"
#include "io/hf_convert.h"

namespace gatedlm::cli {

namespace fs = std::filesystem;

void register_export(CLI::App& app) {
  struct Options {
    std::string checkpoint, out, format, dtype = "f32", gguf_arch = "auto";
  };
  auto opt = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "export",
      "Write a checkpoint as a Hugging Face model directory: config.json + model.safetensors. paper: the "
      "gated-attention paper's layout (a G1 sigmoid gate, elementwise or headwise, fused into q_proj; load it "
      "with the authors' modeling_qwen3.py); qwen3: transformers' Qwen3 (ungated models); qwen3_next, qwen3_5, "
      "qwen3_5_moe: transformers' text-only Qwen3-Next / Qwen3.5 / Qwen3.5-MoE (hybrids or all-softmax models with "
      "the G1 elementwise sigmoid gate and zero-centred norms); gguf: DIR/model.gguf "
      "for llama.cpp (F32, F16, BF16, Q8_0, Q4_0, the K-quants and their _M mixes, ...: --dtype; architecture qwen3 / qwen3moe for ungated models, qwen35 / "
      "qwen35moe for hybrids of Gated DeltaNet and G1-gated softmax layers, or qwen3next for MoE ones with --gguf-arch; no attention biases; a G1-gated model "
      "whose layers are all softmax is refused: llama.cpp aborts on it; with the checkpoint's tokenizer.json "
      "vocabulary when it has one, else the byte tokenizer's for a byte model). The checkpoint's chat template "
      "(chat_template.jinja) goes along: chat_template.jinja in a Hugging Face directory, tokenizer.chat_template in "
      "a GGUF file. A config the format cannot express "
      "is refused by key before anything is written.");
  sub->add_option("CKPT", opt->checkpoint, "checkpoint or run directory")->required();
  sub->add_option("--format", opt->format, io::hf_format_names(" | ") + " | gguf")->required();
  sub->add_option("--out", opt->out, "output directory (must not exist or be empty)")->required();
  sub->add_option("--dtype", opt->dtype, "f32 | bf16 | f16 (round to nearest even); gguf also GGUF's blocks, byte for byte llama.cpp's "
                  "quantiser: q8_0 | q6_k | q5_k | q5_1 | q5_0 | q4_k | iq4_xs | iq4_nl | q4_1 | q4_0 | q3_k | q2_k "
                  "(one type for every matrix; a K-quant's rows not a multiple of 256 take llama.cpp's fallback type; "
                  "norms, routers and 1-D tensors stay f32, as llama.cpp keeps them), or llama.cpp's mixes q5_k_m | "
                  "q4_k_m | q3_k_m (a type per tensor, as llama-quantize chooses them: docs/quantization.md)")
      ->capture_default_str();
  sub->add_option("--gguf-arch", opt->gguf_arch, "gguf only: " + io::gguf_architecture_help())
      ->capture_default_str();
  sub->callback([opt] {
    const bool gguf = opt->format == "gguf";
    if (!gguf && opt->gguf_arch != "auto") fail("--gguf-arch ", opt->gguf_arch, ": only for --format gguf");
    const io::HfFormat format = gguf ? io::HfFormat::qwen3 : io::parse_hf_format(opt->format);
    // Checked before anything is read: gguf's types, or the Hugging Face formats' own.
    const model::WeightRecipe& gguf_dtype = io::parse_gguf_dtype(gguf ? opt->dtype : "f32");
    const kernels::ElementType dtype = gguf ? kernels::ElementType::f32 : io::parse_store_dtype(opt->dtype);
    if (fs::exists(opt->out) && !(fs::is_directory(opt->out) && fs::is_empty(opt->out)))
      fail("--out ", opt->out, ": exists and is not an empty directory (nothing written)");
    const std::string dir = io::resolve_checkpoint_dir(opt->checkpoint);
    io::Checkpoint ck = io::load_checkpoint(dir);  // moved into export_hf
    const fs::path tokenizer = fs::path(dir) / io::kHfTokenizerFile;
    // The checkpoint's chat template (chat_template.jinja, or a tokenizer_config.json's),
    // parsed before anything is written.
    const std::optional<io::ChatTemplateText> chat = io::chat_template_to_carry(dir);
    const std::string chat_note = chat ? cat(", with its chat template (", chat->origin, ")") : "";
    if (gguf) {
      // llama.cpp loads no GGUF without a vocabulary: the checkpoint's tokenizer.json, or for a
      // byte model (vocab_size 258) the byte tokenizer's.
      const bool has_json = fs::exists(tokenizer);
      if (!has_json && ck.config.vocab_size != io::kByteVocabularySize)
        fail(dir, ": no tokenizer.json beside the checkpoint, and its vocab_size ", ck.config.vocab_size,
             " is not the byte tokenizer's (", io::kByteVocabularySize, "); llama.cpp needs a vocabulary: copy the "
             "model's byte-level BPE tokenizer.json to ", tokenizer.string(), " (a SentencePiece .model cannot be "
             "exported as GGUF)");
      const std::string vocab = has_json ? tokenizer.string() : io::kByteVocabulary;
      const std::string arch = io::resolve_gguf_architecture(ck.config, opt->gguf_arch);
      // Validate everything (export_gguf refuses first) before creating the directory.
      fs::create_directories(opt->out);
      try {
        io::export_gguf(ck, gguf_dtype, vocab, (fs::path(opt->out) / "model.gguf").string(), arch,
                        chat ? chat->source : "");
      } catch (...) {
        std::error_code ec;
        if (fs::is_empty(opt->out, ec)) fs::remove(opt->out, ec);
        throw;
      }
      std::fprintf(stderr, "exported %s as gguf (%s, %s%s%s) into %s/model.gguf\n", dir.c_str(), arch.c_str(),
                   opt->dtype.c_str(),
                   has_json ? ", with its tokenizer.json vocabulary" : ", with the byte tokenizer's vocabulary",
                   chat_note.c_str(), opt->out.c_str());
      return;
    }
    io::export_hf(std::move(ck), format, dtype, opt->out);
    if (fs::exists(tokenizer)) fs::copy_file(tokenizer, fs::path(opt->out) / io::kHfTokenizerFile);
    if (chat) io::write_chat_template(*chat, opt->out);
    std::fprintf(stderr, "exported %s as %s (%s%s) into %s\n", dir.c_str(), opt->format.c_str(), opt->dtype.c_str(),
                 chat_note.c_str(), opt->out.c_str());
  });
}

}  // namespace gatedlm::cli
