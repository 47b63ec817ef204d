// gatedlm import: a Hugging Face model directory (the paper's released checkpoints, Qwen3)
// or a GGUF file (llama.cpp's qwen3 / qwen3moe) to a gatedlm checkpoint.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "core/error.h"
#include "core/atomic_file.h"
#include "core/zeroed_allocator.h"
#include "io/chat_template_source.h"
#include "io/gguf_import.h"
#include "io/hf_convert.h"
#include "io/quantized_checkpoint.h"
#include "io/tokenizer_json.h"

namespace gatedlm::cli {

namespace fs = std::filesystem;

namespace {

// ", with its chat template (ORIGIN)" for the import's message, after writing it into the
// checkpoint as chat_template.jinja; "" when there is none.
std::string carry_chat_template(const std::optional<io::ChatTemplateText>& chat, const std::string& out) {
  if (!chat) return "";
  io::write_chat_template(*chat, out);
  return cat(", with its chat template (", chat->origin, ")");
}

// A GGUF file: everything (config, tensors, vocabulary, chat template) is read and checked
// before the checkpoint, its tokenizer.json and chat_template.jinja are written. Its quantised tensors keep their types
// (a quantised checkpoint, io/gguf_blocks.h says which stay in blocks) unless `expand`.
void import_gguf_file(const std::string& src, const std::string& out, bool expand) {
  io::GgufImport g(src);
  const std::optional<io::ChatTemplateText> chat = io::chat_template_to_carry(src);
  const model::ModelConfig& config = g.config();
  // Zeros that take no memory until written: the tensors kept in blocks never are.
  ZeroedVector<float> params(static_cast<size_t>(model::ParamLayout(config).total()));
  model::WeightFormats formats = expand ? model::WeightFormats{} : g.block_formats();
  std::unique_ptr<model::QuantizedWeights> blocks;
  if (!formats.tensors.empty())
    blocks = std::make_unique<model::QuantizedWeights>(model::ParamLayout(config), std::move(formats));
  g.read_weights(params, blocks.get());
  io::require_usable_weights(config, params, src);
  std::string weights = "F32";
  if (blocks) {
    const io::QuantizeSummary s = io::save_quantized_checkpoint(out, config, params, *blocks);
    weights = cat(blocks->formats().name, ": ", s.quantized_tensors, " tensors in their blocks, ", s.f32_tensors, " F32");
  } else {
    io::save_checkpoint(out, config, params);
  }
  const std::string& tokenizer_json = g.vocabulary().tokenizer_json;
  if (!tokenizer_json.empty()) write_file_atomic((fs::path(out) / io::kHfTokenizerFile).string(), tokenizer_json);
  const std::string chat_note = carry_chat_template(chat, out);
  std::fprintf(stderr, "imported %s (GGUF %s, %lld parameters; weights %s) into %s; vocabulary: %s%s\n", src.c_str(),
               g.architecture().c_str(), static_cast<long long>(params.size()), weights.c_str(), out.c_str(),
               g.vocabulary().description.c_str(), chat_note.c_str());
  if (!g.skipped().empty()) std::fprintf(stderr, "%s\n", g.skipped().c_str());
}

}  // namespace

void register_import(CLI::App& app) {
  struct Options {
    std::string src, out, format = "auto", dtype = "keep";
  };
  auto opt = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "import",
      "Convert a Hugging Face model directory (config.json + model.safetensors or a sharded "
      "model.safetensors.index.json; F32, BF16 or F16) into a gatedlm checkpoint. Formats: paper (the "
      "gated-attention paper's checkpoints, gate rows inside q_proj), qwen3 (transformers' Qwen3), and the hybrids "
      "qwen3_next (Qwen3-Next), qwen3_5 and qwen3_5_moe (Qwen3.5 / Qwen3.6 text models; a multimodal checkpoint's "
      "vision tower and MTP layers are skipped, with a line saying so). "
      "A GGUF file (llama.cpp's qwen3, qwen3moe and the hybrids qwen35, qwen35moe, qwen3next) is imported with its "
      "vocabulary written as tokenizer.json; its quantised tensors (Q8_0, Q4_0, the K-quants, IQ4_XS, ... BF16) keep "
      "their types in a quantised checkpoint, as `quantize` writes one (--dtype f32 expands them for training); other "
      "architectures and tensor types are refused by name. "
      "Anything gatedlm cannot represent is refused by name and nothing is written: unknown or duplicate config "
      "keys, missing tensors (found from the safetensors headers), NaN or Inf weights (naming tensor and element). "
      "A tokenizer.json beside the weights is loaded and checked, then copied into the checkpoint; the chat template "
      "(chat_template.jinja or tokenizer_config.json's chat_template; a GGUF file's tokenizer.chat_template) is parsed, "
      "then written into it as chat_template.jinja. A Hugging "
      "Face model's weights are stored as F32.");
  sub->add_option("SRC", opt->src, "the Hugging Face model directory, or a .gguf file")->required();
  sub->add_option("--out", opt->out, "checkpoint directory to create (must not exist or be empty)")->required();
  sub->add_option("--format", opt->format,
                  "auto | " + io::hf_format_names(" | ") + " | gguf (auto: gguf for a file that starts "
                  "with GGUF's magic, else by config.json's model_type, else paper when the config has the paper's keys)")
      ->capture_default_str();
  sub->add_option("--dtype", opt->dtype,
                  "GGUF files: keep (quantised tensors stay in their blocks and types: a checkpoint the inference "
                  "commands run) | f32 (every tensor expanded: a checkpoint training can start from)")
      ->check(CLI::IsMember({"keep", "f32"}))
      ->capture_default_str();
  sub->callback([opt] {
    if (fs::exists(opt->out) && !(fs::is_directory(opt->out) && fs::is_empty(opt->out)))
      fail("--out ", opt->out, ": exists and is not an empty directory (nothing written)");
    if (opt->format == "gguf" || (opt->format == "auto" && io::is_gguf_file(opt->src)))
      return import_gguf_file(opt->src, opt->out, opt->dtype == "f32");
    std::optional<io::HfFormat> format;
    if (opt->format != "auto") format = io::parse_hf_format(opt->format);
    io::ImportedModel m = io::import_hf(opt->src, format);
    // The tokenizer is loaded (every check of load_tokenizer_json) before anything is written.
    const fs::path tokenizer = fs::path(opt->src) / io::kHfTokenizerFile;
    if (fs::exists(tokenizer)) {
      const std::unique_ptr<io::Tokenizer> t = io::load_tokenizer_json(tokenizer.string());
      if (t->vocab_size() > m.checkpoint.config.vocab_size)
        fail(tokenizer.string(), ": the tokenizer has ", t->vocab_size(), " ids, more than the model's vocab_size ",
             m.checkpoint.config.vocab_size, " (nothing written)");
    }
    const std::optional<io::ChatTemplateText> chat = io::chat_template_to_carry(opt->src);
    io::require_usable_weights(m.checkpoint.config, m.checkpoint.params, m.weights_source);
    io::save_checkpoint(opt->out, m.checkpoint.config, m.checkpoint.params);
    for (const std::string& note : m.notes) std::fprintf(stderr, "%s\n", note.c_str());
    if (fs::exists(tokenizer)) fs::copy_file(tokenizer, fs::path(opt->out) / io::kHfTokenizerFile);
    const std::string chat_note = carry_chat_template(chat, opt->out);
    std::fprintf(stderr, "imported %s (format %s, %s, %lld parameters) into %s%s%s\n", m.weights_source.c_str(),
                 io::to_string(m.format).c_str(), model::describe_gate(m.checkpoint.config).c_str(),
                 static_cast<long long>(m.checkpoint.params.size()), opt->out.c_str(),
                 fs::exists(tokenizer) ? " with its tokenizer.json" : "", chat_note.c_str());
  });
}

}  // namespace gatedlm::cli
