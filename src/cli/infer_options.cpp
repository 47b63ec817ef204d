#include "cli/infer_options.h"

#include <CLI/CLI.hpp>

#include "infer/kv_cache.h"

namespace gatedlm::cli {

void add_checkpoint_options(CLI::App* sub, std::string& checkpoint, std::string& tokenizer) {
  sub->add_option("--checkpoint", checkpoint, kModelPathHelp)->required();
  sub->add_option("--tokenizer", tokenizer,
                  "byte, a SentencePiece .model or a Hugging Face tokenizer.json (default: a GGUF file's vocabulary, the "
                  "one the checkpoint's run was trained with, else a tokenizer.model or tokenizer.json beside the "
                  "checkpoint or inside the Hugging Face directory)");
}

void add_sampling_options(CLI::App* sub, infer::SamplingParams& sampling, infer::StopRules& rules) {
  sub->add_option("--max-tokens", rules.max_tokens, "tokens to generate at most")->capture_default_str();
  sub->add_option("--temperature", sampling.temperature, "softmax temperature; 0 = greedy")->capture_default_str();
  sub->add_option("--top-k", sampling.top_k, "keep the k most probable tokens (0 = off)")->capture_default_str();
  sub->add_option("--top-p", sampling.top_p, "nucleus: keep the smallest set with this mass (1 = off)")
      ->capture_default_str();
  sub->add_option("--min-p", sampling.min_p, "drop tokens below min_p x the top probability (0 = off)")
      ->capture_default_str();
  sub->add_option("--repetition-penalty", sampling.repetition_penalty,
                  "divide seen tokens' positive logits by this, multiply negative ones (1 = off)")
      ->capture_default_str();
  sub->add_option("--seed", sampling.seed, "sampling seed: the same seed gives the same text")->capture_default_str();
  sub->add_option("--stop", rules.stop, "stop string (repeatable); the text ends before it");
}

void add_kv_type_option(CLI::App* sub, kernels::ElementType& kv_type) {
  sub->add_option_function<std::string>(
         "--kv-type",
         [&kv_type](const std::string& name) { kv_type = kernels::parse_element_type(name, "--kv-type", infer::kKvCacheTypes); },
         "the KV cache's rows: f32; f16 (half the memory and half the bytes each decode step reads at long "
         "context; logits move by about 5e-4 relative); or q8_0 (llama.cpp's Q8_0 blocks, 34 bytes per 32 values: "
         "0.27 of f32's, head_dim a multiple of 32; logits move by about 1e-2). Attention computes in fp32 on the "
         "rounded rows")
      ->check(CLI::IsMember({"f32", "f16", "q8_0"}))
      ->default_str("f32");
}

}  // namespace gatedlm::cli
