// gatedlm generate: prefill a prompt and sample a continuation over the KV cache,
// streaming the text to stdout (or one JSON object with --json).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <algorithm>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/infer_options.h"
#include "core/error.h"
#include "core/json_file.h"
#include "io/model_loader.h"
#include "infer/run_generation.h"

namespace gatedlm::cli {

namespace {

// Limits that keep a mistyped flag from allocating gigabytes: a prompt file is read up to
// 64 MiB (the largest context, 2^22 tokens, is far less text); --max-tokens up to 2^20.
constexpr size_t kMaxPromptFileBytes = size_t{64} << 20;
constexpr int64_t kMaxGeneratedTokens = int64_t{1} << 20;

}  // namespace

void register_generate(CLI::App& app) {
  struct Options {
    std::string checkpoint, prompt, prompt_file, tokenizer;
    infer::SamplingParams sampling;
    infer::StopRules rules;
    int64_t window = 0, sinks = 0;
    kernels::ElementType kv_type = kernels::ElementType::f32;
    bool json = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "generate",
      "Continue a prompt: prefill it in one pass, then decode token by token over the KV cache. The text streams to "
      "stdout as it is produced; --json prints one object instead: prompt_ids, ids, text, finish_reason (length, stop, "
      "eos, or context: the model's max_seq_len is full, as in serve; --window streams past it), "
      "prefill_tokens_per_s, decode_tokens_per_s.");
  add_checkpoint_options(sub, opt->checkpoint, opt->tokenizer);
  auto* p = sub->add_option("--prompt", opt->prompt, "prompt text");
  auto* pf = sub->add_option("--prompt-file", opt->prompt_file, "file holding the prompt text")->check(CLI::ExistingFile);
  p->excludes(pf);
  add_sampling_options(sub, opt->sampling, opt->rules);
  sub->add_option("--window", opt->window, "streaming window: keep only the last W tokens in the cache (0 = all)")
      ->capture_default_str();
  sub->add_option("--sinks", opt->sinks, "with --window: also keep the first K tokens (attention sinks)")
      ->capture_default_str();
  add_kv_type_option(sub, opt->kv_type);
  sub->add_flag("--json", opt->json, "print one JSON object at the end instead of streaming text");
  sub->callback([opt] {
    if (opt->prompt.empty() == opt->prompt_file.empty() && opt->prompt_file.empty())
      fail("generate: give --prompt TEXT or --prompt-file FILE");
    if (opt->window < 0 || opt->sinks < 0) fail("--window and --sinks must not be negative");
    if (opt->sinks > 0 && opt->window == 0) fail("--sinks needs --window");
    infer::validate(opt->sampling);
    if (opt->rules.max_tokens > kMaxGeneratedTokens)
      fail("--max-tokens ", opt->rules.max_tokens, ": at most ", kMaxGeneratedTokens, " tokens per generation");
    const std::string text = opt->prompt_file.empty()
                                 ? opt->prompt
                                 : read_file_at_most(opt->prompt_file, kMaxPromptFileBytes, "prompt file (--prompt-file)");
    const io::LoadedModel lm = io::load_model(opt->checkpoint, io::ModelLoadOptions::reading_text(opt->tokenizer));
    const std::vector<int32_t> prompt = infer::prompt_ids(*lm.tokenizer, text);
    infer::StopRules rules = opt->rules;
    rules.eos = lm.tokenizer->eos_id();
    rules.max_tokens =
        infer::fit_to_context(static_cast<int64_t>(prompt.size()), opt->rules.max_tokens, opt->window,
                              lm.model->config().max_seq_len,
                              opt->prompt_file.empty() ? "--prompt" : "--prompt-file " + opt->prompt_file);
    // Stopped because the context is full, not because --max-tokens was reached.
    const bool context_bound = rules.max_tokens < opt->rules.max_tokens;
    infer::Generation gen(prompt, opt->sampling, rules, lm.tokenizer.get());
    const int64_t capacity = static_cast<int64_t>(prompt.size()) + rules.max_tokens;
    infer::Decoder dec(*lm.model, {.slots = 1, .capacity = capacity, .window = opt->window, .sinks = opt->sinks,
                                   .kv_type = opt->kv_type});
    const infer::GenerationTiming t = infer::run_generation(dec, 0, gen, [&](const std::string& piece) {
      if (opt->json) return;
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    });
    // "context": the model's context (max_seq_len) is full; --window streams past it.
    const bool hit_context = context_bound && gen.finish_reason() == infer::FinishReason::length;
    const std::string finish = hit_context ? "context" : infer::to_string(gen.finish_reason());
    if (opt->json) {
      const nlohmann::json j{{"prompt_ids", gen.prompt()},
                             {"ids", gen.generated()},
                             {"text", gen.text()},
                             {"finish_reason", finish},
                             {"prompt_tokens", t.prompt_tokens},
                             {"generated_tokens", gen.generated().size()},
                             {"prefill_tokens_per_s", t.prefill_tokens_per_s()},
                             {"decode_tokens_per_s", t.decode_tokens_per_s()},
                             {"seed", opt->sampling.seed},
                             {"tokenizer", lm.tokenizer_source}};
      std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else {
      std::printf("\n");
      std::fprintf(stderr, "[%lld prompt tokens, %lld generated (%s); prefill %.1f tok/s, decode %.1f tok/s]\n",
                   static_cast<long long>(t.prompt_tokens), static_cast<long long>(gen.generated().size()),
                   finish.c_str(), t.prefill_tokens_per_s(), t.decode_tokens_per_s());
      if (hit_context)
        std::fprintf(stderr, "[stopped at the model's context of %lld tokens (max_seq_len); --window W streams past it]\n",
                     static_cast<long long>(lm.model->config().max_seq_len));
    }
  });
}

}  // namespace gatedlm::cli
