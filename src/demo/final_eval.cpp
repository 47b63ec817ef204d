#include "demo/final_eval.h"

#include <algorithm>
#include <filesystem>

#include "analysis/analyze.h"
#include "analysis/sequences.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/format.h"
#include "eval/evaluate.h"
#include "io/checkpoint.h"
#include "io/text_corpus.h"
#include "io/token_dataset.h"
#include "io/tokenizer.h"
#include "model/model.h"

namespace gatedlm::demo {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// What every run's evaluation shares, loaded when the first run needs it.
struct Shared {
  const FinalEvalInputs& in;
  io::TokenDataset dataset;
  std::vector<int32_t> val_ids, heldout_ids;  // loaded and encoded when first needed
  std::string heldout_text;
};

void evaluate_heldout(Shared& sh, const RunInfo& r, model::Model<float>& m, const std::string& key,
                      const StageLog& log) {
  const FinalEvalInputs& in = sh.in;
  const auto tok = sh.dataset.tokenizer();
  if (sh.heldout_ids.empty()) {
    sh.heldout_text = io::read_text_file(in.texts.heldout_path);
    sh.heldout_ids = tok->encode(sh.heldout_text);
  }
  const auto& ids = sh.heldout_ids;
  const double bpt = static_cast<double>(sh.heldout_text.size()) / static_cast<double>(std::max<size_t>(ids.size(), 1));
  const std::string& name = in.texts.heldout_name;
  log.say("evaluate", cat(r.name, " on ", name, ": ",
                          thousands(std::min<int64_t>(in.preset.heldout_tokens, static_cast<int64_t>(ids.size()))),
                          " of its ", thousands(static_cast<int64_t>(ids.size())), " tokens ..."));
  const eval::EvalResult e =
      eval::evaluate(m, ids, tok->bos_id(), in.tc.seq_len, in.preset.heldout_tokens, in.tc.batch_size, bpt);
  write_file_atomic((fs::path(r.dir) / "heldout.json").string(), json{{"key", key},
                                                                      {"text", name},
                                                                      {"file", in.texts.heldout_path},
                                                                      {"loss", e.loss},
                                                                      {"ppl", e.ppl},
                                                                      {"bpb", e.bpb},
                                                                      {"tokens", e.tokens},
                                                                      {"bytes_per_token", bpt}}
                                                                         .dump(2) +
                                                                     "\n");
  log.say("evaluate", cat(r.name, " on ", name, ": loss ", e.loss, ", bits per byte ", e.bpb));
}

void analyze_run(Shared& sh, const RunInfo& r, model::Model<float>& m, const model::ModelConfig& config,
                 const std::string& key, const StageLog& log) {
  const Preset& preset = sh.in.preset;
  if (sh.val_ids.empty()) sh.val_ids = sh.dataset.load_split("val");
  const io::DatasetManifest& mf = sh.dataset.manifest();
  const int64_t len =
      std::min<int64_t>({preset.analyze_seq_len, config.max_seq_len, static_cast<int64_t>(sh.val_ids.size()) + 1});
  const analysis::SequenceSet seqs = analysis::sample_windows(sh.val_ids, mf.bos_id, preset.analyze_sequences, len, 0);
  analysis::AnalyzeOptions ao;  // attention maps of the first and the last layer
  ao.checkpoint = io::resolve_checkpoint_dir(r.dir);
  ao.source = {{"kind", "data"},
               {"dir", sh.in.data.data_dir},
               {"split", "val"},
               {"tokenizer", mf.tokenizer},
               {"stream_tokens", sh.val_ids.size()}};
  log.say("analyze", cat(r.name, ": attention sink, massive activations", config.has_gate() ? ", gate" : "", " over ",
                         seqs.count, " validation windows of ", seqs.length, " tokens ..."));
  const json a = analysis::analyze(m, seqs, ao);
  const fs::path dir(r.dir);
  write_file_atomic((dir / "analysis.json").string(), a.dump(1) + "\n");
  write_stamp((dir / "analysis.key").string(), key);
  log.say("analyze",
          cat(r.name, ": F-Attn ", a["f_attn"]["mean"].get<double>(), ", M-Act ",
              a["massive_activations"]["m_act"].get<double>(),
              a["gates"].is_null() ? "" : cat(", mean gate score ", a["gates"]["mean_score"].get<double>())));
}

void evaluate_run(Shared& sh, const RunInfo& r, bool fresh, const StageLog& log) {
  const FinalEvalInputs& in = sh.in;
  const fs::path dir(r.dir);
  const json summary = read_json_or_null((dir / "summary.json").string());
  const int64_t steps = summary.is_object() ? summary.value("steps", int64_t{0}) : 0;
  const std::string heldout_key =
      stage_key({"heldout", r.key, steps, in.texts.heldout_sha, in.preset.heldout_tokens, in.tc.seq_len});
  const std::string analysis_key =
      stage_key({"analysis", r.key, steps, in.preset.analyze_sequences, in.preset.analyze_seq_len});
  const json heldout = read_json_or_null((dir / "heldout.json").string());
  const bool need_heldout =
      !in.texts.heldout_path.empty() && (fresh || !heldout.is_object() || heldout.value("key", "") != heldout_key);
  const bool need_analysis =
      fresh || !fs::exists(dir / "analysis.json") || !stamp_matches((dir / "analysis.key").string(), analysis_key);
  if (!need_heldout && !need_analysis) {
    log.say("evaluate", cat(r.name, ": reusing heldout.json and analysis.json"));
    return;
  }
  io::Checkpoint ck = io::load_checkpoint(r.dir);
  model::Model<float> m(ck.config);
  m.load_params(ck.params);
  if (need_heldout) evaluate_heldout(sh, r, m, heldout_key, log);
  if (need_analysis) analyze_run(sh, r, m, ck.config, analysis_key, log);
}

}  // namespace

void evaluate_runs(const std::vector<RunInfo>& runs, const FinalEvalInputs& in, bool fresh, const StageLog& log) {
  Shared sh{in, io::TokenDataset::open(in.data.data_dir), {}, {}, {}};
  for (const RunInfo& r : runs)
    if (!r.diverged) evaluate_run(sh, r, fresh, log);
}

}  // namespace gatedlm::demo
