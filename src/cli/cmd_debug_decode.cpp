// gatedlm debug decode: the logits of sequences of different lengths computed twice, by
// the full-sequence forward and incrementally (prefill + decode over the KV cache, with
// the sequences staggered so that one step mixes a prompt with other sequences' decode
// tokens), written to safetensors for tests/reference/test_decode_against_forward.py.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/commands.h"
#include "cli/infer_options.h"
#include "core/error.h"
#include "infer/decoder.h"
#include "io/model_loader.h"
#include "io/safetensors.h"
#include "io/token_ids.h"
#include "model/model.h"

namespace gatedlm::cli {

void register_debug_decode(CLI::App& app) {
  struct Options {
    std::string checkpoint, token_ids, out;
    std::vector<int64_t> prompt_lengths;
    int64_t window = 0, sinks = 0;
    kernels::ElementType kv_type = kernels::ElementType::f32;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* debug = app.get_subcommand("debug");
  CLI::App* sub = debug->add_subcommand(
      "decode",
      "Logits of each sequence from the full forward (full_logits [N,V]) and from prefill + decode over the KV "
      "cache (incremental_logits [N,V]), N = all tokens of all sequences in file order; sequence i prefills "
      "its prompt at step i while the earlier ones decode.");
  sub->add_option("--checkpoint", opt->checkpoint, kModelPathHelp)->required();
  sub->add_option("--token-ids", opt->token_ids, "token ids, one sequence per line (any lengths)")
      ->required()
      ->check(CLI::ExistingFile);
  sub->add_option("--prompt-lengths", opt->prompt_lengths,
                  "prompt (prefill) length of each sequence, comma separated (default: half of each)")
      ->delimiter(',');
  sub->add_option("--window", opt->window, "streaming window (0: full cache)")->capture_default_str();
  sub->add_option("--sinks", opt->sinks, "sink tokens kept with --window")->capture_default_str();
  add_kv_type_option(sub, opt->kv_type);
  sub->add_option("--out", opt->out, "output .safetensors file")->required();
  sub->callback([opt] {
    const io::LoadedModel loaded = io::load_model(opt->checkpoint);
    model::Model<float>& m = *loaded.model;
    const auto seqs = io::read_token_ids(opt->token_ids);
    const int64_t B = static_cast<int64_t>(seqs.size()), V = m.config().vocab_size;
    if (!opt->prompt_lengths.empty() && static_cast<int64_t>(opt->prompt_lengths.size()) != B)
      fail("--prompt-lengths: ", opt->prompt_lengths.size(), " lengths for ", B, " sequences in ", opt->token_ids);
    std::vector<int64_t> prompt(B), offset(B + 1, 0);
    int64_t longest = 0;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t len = static_cast<int64_t>(seqs[b].size());
      prompt[b] = opt->prompt_lengths.empty() ? std::max<int64_t>(1, len / 2) : opt->prompt_lengths[b];
      if (prompt[b] < 1 || prompt[b] > len)
        fail("--prompt-lengths: ", prompt[b], " for sequence ", b, " of ", len, " tokens");
      offset[b + 1] = offset[b] + len;
      longest = std::max(longest, len);
    }
    std::vector<float> full(offset[B] * V), incremental(offset[B] * V);
    for (int64_t b = 0; b < B; ++b) {
      const int64_t len = static_cast<int64_t>(seqs[b].size());
      m.forward(seqs[b].data(), nullptr, 1, len);
      std::copy_n(m.logits(), len * V, full.data() + offset[b] * V);
    }
    infer::Decoder dec(m, {.slots = B, .capacity = longest, .window = opt->window, .sinks = opt->sinks,
                           .kv_type = opt->kv_type});
    std::vector<int64_t> done(B, 0);  // tokens of each sequence run so far
    for (int64_t step = 0;; ++step) {
      std::vector<infer::Chunk> chunks;
      for (int64_t b = 0; b < B && b <= step; ++b) {
        const int64_t len = static_cast<int64_t>(seqs[b].size());
        if (done[b] >= len) continue;
        const int64_t take = done[b] == 0 ? prompt[b] : 1;
        chunks.push_back({b, std::span<const int32_t>(seqs[b]).subspan(done[b], take)});
      }
      if (chunks.empty() && step >= B) break;
      if (chunks.empty()) continue;
      const float* logits = dec.step(chunks, /*all_rows=*/true);
      for (const infer::Chunk& ch : chunks) {
        const int64_t rows = static_cast<int64_t>(ch.tokens.size());
        std::copy_n(logits, rows * V, incremental.data() + (offset[ch.slot] + done[ch.slot]) * V);
        logits += rows * V;
        done[ch.slot] += rows;
      }
    }
    io::write_safetensors(opt->out, {{"full_logits", {offset[B], V}, full.data()},
                                     {"incremental_logits", {offset[B], V}, incremental.data()}});
    std::printf("%lld sequences, %lld tokens; %lld packed weight matrices; wrote %s\n", static_cast<long long>(B),
                static_cast<long long>(offset[B]), static_cast<long long>(dec.packed_weights().matrices()),
                opt->out.c_str());
  });
}

}  // namespace gatedlm::cli
