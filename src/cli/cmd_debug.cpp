// gatedlm debug grads: dump logits, loss, every gradient and a few AdamW steps' losses
// to safetensors, for comparison with the PyTorch reference (tests/reference/).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "cli/commands.h"
#include "cli/infer_options.h"
#include "core/error.h"
#include "io/model_loader.h"
#include "io/safetensors.h"
#include "io/token_ids.h"
#include "model/model.h"
#include "train/optimizer.h"

namespace gatedlm::cli {

namespace {

struct DebugGradsOptions {
  std::string checkpoint, token_ids, out;
  int adamw_steps = 0;
  double lr = 1e-3;
  train::AdamWConfig adamw;
};

// The token-id file's sequences (all of one length T) as tokens and next-token targets
// [B, T] (the last position's target ignored); returns {B, T}.
std::pair<int64_t, int64_t> next_token_batch(const std::string& file, const model::ModelConfig& config,
                                             std::vector<int32_t>& tokens, std::vector<int32_t>& targets) {
  const auto sequences =
      io::read_token_ids(file, io::TokenIdLimits{config.vocab_size, config.max_seq_len, 1, "max_seq_len"});
  const int64_t B = static_cast<int64_t>(sequences.size()), T = static_cast<int64_t>(sequences[0].size());
  for (const auto& s : sequences) {
    if (static_cast<int64_t>(s.size()) != T) fail(file, ": every sequence must have the same length (", T, ")");
    for (int64_t t = 0; t < T; ++t) {
      tokens.push_back(s[t]);
      targets.push_back(t + 1 < T ? s[t + 1] : -1);
    }
  }
  return {B, T};
}

// Logits, loss, every gradient and the AdamW steps' losses to o.out (safetensors).
void run_debug_grads(const DebugGradsOptions& o) {
  const io::LoadedModel loaded = io::load_model(o.checkpoint);
  if (loaded.quantized)
    fail(o.checkpoint, ": a ", loaded.weight_format(), " checkpoint; debug grads trains, which needs F32 weights");
  model::Model<float>& m = *loaded.model;
  const model::ModelConfig& config = m.config();
  std::vector<int32_t> tokens, targets;
  const auto [batch, seq] = next_token_batch(o.token_ids, config, tokens, targets);
  const int64_t B = batch, T = seq;
  // The loss backward differentiates: the mean cross-entropy plus, with MoE, the weighted
  // auxiliary losses (model/moe.h), which are also written alone (aux_lb, aux_z).
  auto full_loss = [&] { return m.forward(tokens.data(), targets.data(), B, T) + m.moe_aux().total; };
  m.zero_grads();
  const float loss = static_cast<float>(full_loss());
  const model::MoeAuxLosses aux = m.moe_aux();
  const float aux_lb = static_cast<float>(aux.lb), aux_z = static_cast<float>(aux.z);
  m.backward();
  const int64_t V = config.vocab_size;
  std::vector<float> logits(m.logits(), m.logits() + B * T * V);
  std::vector<float> grads(m.grads().begin(), m.grads().end());
  std::vector<float> losses{loss};
  train::AdamW<float> optimizer(m.layout(), o.adamw);
  for (int i = 0; i < o.adamw_steps; ++i) {
    if (i > 0) {  // the first update uses the gradient computed above
      m.zero_grads();
      m.forward(tokens.data(), targets.data(), B, T);
      m.backward();
    }
    optimizer.step(m.params(), m.grads(), o.lr);
    losses.push_back(static_cast<float>(full_loss()));
  }
  std::vector<io::TensorRef> out{{"logits", {B, T, V}, logits.data()}, {"loss", {1}, &loss}};
  if (config.has_moe()) {
    out.push_back({"aux_lb", {1}, &aux_lb});
    out.push_back({"aux_z", {1}, &aux_z});
  }
  for (const model::ParamSpec& s : m.layout().specs())
    out.push_back({"grad." + s.name, s.shape, grads.data() + s.offset});
  if (o.adamw_steps > 0)
    out.push_back({"adamw_losses", {static_cast<int64_t>(losses.size())}, losses.data()});
  io::write_safetensors(o.out, out);
  std::printf("loss %.6f; wrote %s\n", loss, o.out.c_str());
}

}  // namespace

void register_debug(CLI::App& app) {
  auto opt = std::make_shared<DebugGradsOptions>();
  CLI::App* debug = app.add_subcommand("debug", "Developer tools: numerical dumps for reference checks.");
  debug->require_subcommand(1);
  CLI::App* sub = debug->add_subcommand(
      "grads",
      "Forward and backward on equal-length token sequences; writes logits [B,T,V], loss [1] (with MoE: "
      "cross-entropy + lb_coef * aux_lb + z_coef * aux_z, and aux_lb [1], aux_z [1]), grad.<param> "
      "and adamw_losses [steps+1] (loss before the first update and after each) to a safetensors file.");
  sub->add_option("--checkpoint", opt->checkpoint, cat(kModelPathHelp, " (F32 weights: not quantised)"))->required();
  sub->add_option("--token-ids", opt->token_ids, "token ids, one sequence per line, all the same length")
      ->required()
      ->check(CLI::ExistingFile);
  sub->add_option("--out", opt->out, "output .safetensors file")->required();
  sub->add_option("--adamw-steps", opt->adamw_steps, "AdamW updates to take after the gradient dump")
      ->capture_default_str();
  sub->add_option("--lr", opt->lr, "AdamW learning rate")->capture_default_str();
  sub->add_option("--beta1", opt->adamw.beta1, "AdamW beta1")->capture_default_str();
  sub->add_option("--beta2", opt->adamw.beta2, "AdamW beta2")->capture_default_str();
  sub->add_option("--eps", opt->adamw.eps, "AdamW epsilon")->capture_default_str();
  sub->add_option("--weight-decay", opt->adamw.weight_decay, "AdamW weight decay (matrices only)")
      ->capture_default_str();
  sub->callback([opt] { run_debug_grads(*opt); });
}

}  // namespace gatedlm::cli
