// gatedlm generate: prefill a prompt and sample a continuation over the KV cache,
// streaming the text to stdout (or one JSON object with --json).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/infer_options.h"
#include "core/error.h"
#include "infer/model_files.h"
#include "infer/run_generation.h"

namespace gatedlm::cli {

void register_generate(CLI::App& app) {
  struct Options {
    std::string checkpoint, prompt, prompt_file, tokenizer;
    infer::SamplingParams sampling;
    infer::StopRules rules;
    int64_t window = 0, sinks = 0;
    bool json = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "generate",
      "Continue a prompt: prefill it in one pass, then decode token by token over the KV cache. The text streams to "
      "stdout as it is produced; --json prints one object instead: prompt_ids, ids, text, finish_reason, "
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
  sub->add_flag("--json", opt->json, "print one JSON object at the end instead of streaming text");
  sub->callback([opt] {
    if (opt->prompt.empty() == opt->prompt_file.empty() && opt->prompt_file.empty())
      fail("generate: give --prompt TEXT or --prompt-file FILE");
    if (opt->window < 0 || opt->sinks < 0) fail("--window and --sinks must not be negative");
    if (opt->sinks > 0 && opt->window == 0) fail("--sinks needs --window");
    infer::validate(opt->sampling);
    std::string text = opt->prompt;
    if (!opt->prompt_file.empty()) {
      std::ifstream in(opt->prompt_file, std::ios::binary);
      text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      if (!in.good() && !in.eof()) fail(opt->prompt_file, ": cannot read");
    }
    infer::LoadedModel lm = infer::load_model(opt->checkpoint, opt->tokenizer);
    std::vector<int32_t> prompt{lm.tokenizer->bos_id()};
    for (int32_t t : lm.tokenizer->encode(text)) prompt.push_back(t);
    infer::StopRules rules = opt->rules;
    rules.eos = lm.tokenizer->eos_id();
    infer::Generation gen(prompt, opt->sampling, rules, lm.tokenizer.get());
    const int64_t capacity = static_cast<int64_t>(prompt.size()) + rules.max_tokens;
    infer::Decoder dec(*lm.model, {1, capacity, opt->window, opt->sinks});
    const infer::GenerationTiming t = infer::run_generation(dec, 0, gen, [&](const std::string& piece) {
      if (opt->json) return;
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    });
    if (opt->json) {
      const nlohmann::json j{{"prompt_ids", gen.prompt()},
                             {"ids", gen.generated()},
                             {"text", gen.text()},
                             {"finish_reason", infer::to_string(gen.finish_reason())},
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
                   infer::to_string(gen.finish_reason()).c_str(), t.prefill_tokens_per_s(), t.decode_tokens_per_s());
    }
  });
}

}  // namespace gatedlm::cli
