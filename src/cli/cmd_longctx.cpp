// gatedlm longctx: long-context evaluation of a checkpoint at several lengths, with the
// checkpoint's RoPE or overridden (docs/longctx.md).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <utility>

#include "cli/commands.h"
#include "cli/eval_source_options.h"
#include "cli/infer_options.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "eval/longctx.h"
#include "io/checkpoint.h"
#include "io/model_loader.h"
#include "io/eval_stream.h"

namespace gatedlm::cli {
namespace {

std::string fmt(const nlohmann::json& v, const char* spec) {
  if (!v.is_number()) return "-";
  char b[32];
  std::snprintf(b, sizeof b, spec, v.get<double>());
  return b;
}

void print_table(const nlohmann::json& doc) {
  std::printf("%7s  %-6s %7s  %9s %9s %9s", "length", "rope", "factor", "ppl", "ppl<=train", "ppl>train");
  for (const auto& t : doc["tasks"]) std::printf("  %15s", t.get<std::string>().c_str());
  std::printf("\n");
  for (const auto& L : doc["lengths"]) {
    const auto& p = L.contains("perplexity") ? L["perplexity"] : nlohmann::json::object();
    auto exp_of = [](const nlohmann::json& v) { return v.is_number() ? nlohmann::json(std::exp(v.get<double>())) : v; };
    std::printf("%7lld  %-6s %7s  %9s %9s %9s", static_cast<long long>(L["length"].get<int64_t>()),
                L["rope"]["scaling"].get<std::string>().c_str(), fmt(L["rope"]["factor"], "%.3g").c_str(),
                fmt(p.value("ppl", nlohmann::json()), "%.3f").c_str(),
                fmt(exp_of(p.value("loss_within_train_len", nlohmann::json())), "%.3f").c_str(),
                fmt(exp_of(p.value("loss_beyond_train_len", nlohmann::json())), "%.3f").c_str());
    for (const auto& t : doc["tasks"]) {
      const auto& r = L["tasks"][t.get<std::string>()];
      if (r.contains("skipped")) {
        std::printf("  %15s", "(too short)");
      } else {
        std::string cell = fmt(r["score"], "%.2f") + " / " + fmt(r["digit_accuracy"], "%.2f");
        std::printf("  %15s", cell.c_str());
      }
    }
    std::printf("\n");
  }
  std::printf("(tasks: share of values recovered / digit accuracy, teacher-forced)\n");
}

struct LongctxCliOptions {
  std::string checkpoint, out;
  std::vector<int64_t> lengths;
  io::EvalSource source;
  std::string rope_scaling, factor, filler = "neutral";
  std::vector<std::string> tasks;
  int64_t original_len = 0, samples = 20, depths = 5, ppl_windows = 16, buckets = 8, batch_tokens = 4096;
  int64_t train_len = 0, distractors = 3, values = 4;
  double rope_base = 0;
  uint64_t seed = 1;
  bool no_ppl = false;
};

// The RoPE override of --rope-scaling, --factor, --original-len and --rope-base.
void set_rope_override(eval::LongctxOptions& o, const LongctxCliOptions& cli) {
  if (!cli.rope_scaling.empty()) o.rope.type = model::parse_rope_scaling_type(cli.rope_scaling, "--rope-scaling");
  if (!cli.factor.empty() && cli.factor != "auto") {
    size_t used = 0;
    double f = 0;
    try {
      f = std::stod(cli.factor, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != cli.factor.size() || !(f >= 1.0))
      fail("--factor: \"", cli.factor, "\" is not a factor (a number >= 1, or auto)");
    o.rope.factor = f;
  } else if (cli.factor == "auto" && !o.rope.type) {
    fail("--factor auto needs --rope-scaling linear|ntk|yarn");
  }
  if (cli.original_len != 0) {
    if (cli.original_len < 1) fail("--original-len must be positive, got ", cli.original_len);
    o.rope.original_len = cli.original_len;
  }
  if (cli.rope_base != 0) o.rope.rope_base = cli.rope_base;
}

// The flags checked and turned into eval::LongctxOptions.
eval::LongctxOptions longctx_options(const LongctxCliOptions& cli) {
  eval::LongctxOptions o;
  eval::check_lengths(cli.lengths, "--lengths");
  o.lengths = cli.lengths;
  set_rope_override(o, cli);
  if (cli.samples < 0) fail("--samples must not be negative, got ", cli.samples);
  if (cli.depths < 1) fail("--depths must be at least 1, got ", cli.depths);
  if (cli.distractors < 0) fail("--distractors must not be negative, got ", cli.distractors);
  if (cli.values < 1) fail("--values must be at least 1, got ", cli.values);
  if (cli.batch_tokens < 1) fail("--batch-tokens must be positive, got ", cli.batch_tokens);
  if (cli.filler != "neutral" && cli.filler != "heldout")
    fail("--filler: unknown value \"", cli.filler, "\" (neutral or heldout)");
  o.samples = cli.samples;
  o.depths = cli.depths;
  o.seed = cli.seed;
  o.ppl_windows = cli.ppl_windows;
  o.buckets = cli.buckets;
  o.batch_tokens = cli.batch_tokens;
  o.train_len = cli.train_len;
  o.perplexity = !cli.no_ppl;
  o.heldout_filler = cli.filler == "heldout";
  o.shape.multikey_distractors = cli.distractors;
  o.shape.multivalue_values = cli.values;
  if (!cli.tasks.empty()) {
    o.tasks.clear();
    for (const std::string& item : cli.tasks) {
      try {
        o.tasks.push_back(eval::parse_task(item));
      } catch (const Error& e) {
        fail("--tasks: ", e.what());
      }
    }
  }
  return o;
}

nlohmann::json rope_override_json(const eval::LongctxOptions& o) {
  const auto& r = o.rope;
  return {{"rope_scaling", r.type ? nlohmann::json(model::to_string(*r.type)) : nlohmann::json(nullptr)},
          {"factor", r.factor ? nlohmann::json(*r.factor) : (r.type ? nlohmann::json("auto") : nlohmann::json(nullptr))},
          {"original_len", r.original_len ? nlohmann::json(*r.original_len) : nlohmann::json(nullptr)},
          {"rope_base", r.rope_base ? nlohmann::json(*r.rope_base) : nlohmann::json(nullptr)}};
}

void run_longctx(const LongctxCliOptions& cli) {
  io::check_eval_source(cli.source);
  const eval::LongctxOptions o = longctx_options(cli);
  // The weights' values (a quantised model's dequantised ones), rebuilt per length below.
  io::ModelLoadOptions load;
  load.release_f32 = false;
  io::LoadedModel loaded = io::load_model(cli.checkpoint, load);
  io::Checkpoint ck{loaded.model->config(), {loaded.model->params().begin(), loaded.model->params().end()}};
  loaded.quantized.reset();
  loaded.model.reset();
  for (int64_t L : o.lengths) eval::config_for_length(ck.config, o.rope, L);  // bad mixes fail before work
  eval::LongctxInput in;
  in.config = ck.config;
  in.params = &ck.params;
  io::EvalStream es = io::load_eval_stream(cli.source, ck.config.vocab_size);
  in.heldout = std::move(es.tokens);
  in.tokenizer = es.tokenizer.get();
  in.bos = es.bos;
  in.eos = es.tokenizer->eos_id();
  nlohmann::json doc = eval::run_longctx(in, o, [](const std::string& line) {
    std::fprintf(stderr, "longctx: %s\n", line.c_str());
  });
  doc["checkpoint"] = loaded.checkpoint_dir;
  doc["data"] = es.origin;
  doc["tokenizer"] = es.tokenizer->name();
  doc["model"] = model::config_to_json(ck.config);
  doc["rope_override"] = rope_override_json(o);
  write_file_atomic(cli.out, doc.dump(2) + "\n");
  print_table(doc);
}

void add_rope_flags(CLI::App* sub, LongctxCliOptions& opt) {
  sub->add_option("--rope-scaling", opt.rope_scaling, "none|linear|ntk|yarn (default: the checkpoint's)");
  sub->add_option("--factor", opt.factor,
                  "scaling factor, or `auto` = max(1, length / original length) per length (the default when "
                  "--rope-scaling is given)");
  sub->add_option("--original-len", opt.original_len,
                  "the original (training) context of the scaling (default: the checkpoint's, i.e. its max_seq_len)");
  sub->add_option("--rope-base", opt.rope_base, "RoPE base (default: the checkpoint's)");
}

void add_task_flags(CLI::App* sub, LongctxCliOptions& opt) {
  sub->add_option("--samples", opt.samples, "examples per task and length (0 = perplexity only)")
      ->capture_default_str();
  sub->add_option("--depths", opt.depths, "needle depths swept from 0 to 1 (samples cycle through them)")
      ->capture_default_str();
  sub->add_option("--tasks", opt.tasks, "comma list of passkey,niah_single,niah_multikey,niah_multivalue (default all)")
      ->delimiter(',');
  sub->add_option("--filler", opt.filler, "neutral (the repeated passkey block) or heldout (held-out text)")
      ->capture_default_str();
  sub->add_option("--distractors", opt.distractors, "niah_multikey: needles with other keys")->capture_default_str();
  sub->add_option("--values", opt.values, "niah_multivalue: values of the queried key")->capture_default_str();
  sub->add_option("--seed", opt.seed, "seed of the examples")->capture_default_str();
}

}  // namespace

void register_longctx(CLI::App& app) {
  auto opt = std::make_shared<LongctxCliOptions>();
  CLI::App* sub = app.add_subcommand(
      "longctx",
      "Long-context evaluation at several lengths: perplexity by position on held-out text, passkey retrieval and "
      "RULER-style needle-in-a-haystack (single, multi-key, multi-value), scored teacher-forced. RoPE flags "
      "override the checkpoint's settings. Writes JSON (docs/longctx.md) and prints a table.");
  sub->add_option("--checkpoint", opt->checkpoint, kModelPathHelp)
      ->required();
  add_eval_source_options(sub, opt->source, "longctx", "as held-out text");
  sub->add_option("--lengths", opt->lengths, "evaluation lengths in tokens, e.g. 256,512,1024")
      ->required()
      ->delimiter(',');
  add_rope_flags(sub, *opt);
  add_task_flags(sub, *opt);
  sub->add_option("--ppl-windows", opt->ppl_windows, "held-out windows per length for perplexity")
      ->capture_default_str();
  sub->add_option("--buckets", opt->buckets, "position buckets of the perplexity curve")->capture_default_str();
  sub->add_flag("--no-ppl", opt->no_ppl, "skip perplexity");
  sub->add_option("--train-len", opt->train_len, "training length for the within/beyond split (default max_seq_len)");
  sub->add_option("--batch-tokens", opt->batch_tokens, "tokens per forward pass")->capture_default_str();
  sub->add_option("--out", opt->out, "the JSON file to write")->required();
  sub->callback([opt] { run_longctx(*opt); });
}

}  // namespace gatedlm::cli
