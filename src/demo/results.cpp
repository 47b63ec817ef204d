#include "demo/results.h"

#include <cctype>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "analysis/run_throughput.h"
#include "core/error.h"
#include "core/format.h"
#include "core/progress.h"
#include "core/stage_cache.h"
#include "model/config.h"

namespace gatedlm::demo {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kDash = "—";


// j[k1][k2]... as a number, else null.
json number_at(const json& j, std::initializer_list<const char*> keys) {
  const json* cur = &j;
  for (const char* k : keys) {
    if (!cur->is_object() || !cur->contains(k)) return nullptr;
    cur = &(*cur)[k];
  }
  return cur->is_number() ? *cur : json(nullptr);
}

// Mean over layers of a share (per_layer[l] then the key path), else null.
json layer_mean(const json& per_layer, std::initializer_list<const char*> keys) {
  if (!per_layer.is_array() || per_layer.empty()) return nullptr;
  double sum = 0;
  for (const json& l : per_layer) {
    const json v = number_at(l, keys);
    if (v.is_null()) return nullptr;
    sum += v.get<double>();
  }
  return sum / static_cast<double>(per_layer.size());
}

// Numbers of a JSON record as the table shows them (core/format.h), "—" where there is none.
std::string fixed_or_dash(const json& v, int digits) { return v.is_number() ? fixed(v.get<double>(), digits) : kDash; }

std::string count(const json& v) { return v.is_number() ? thousands(v.get<int64_t>()) : kDash; }

std::string short_count_or_dash(const json& v) { return v.is_number() ? short_count(v.get<double>()) : kDash; }

std::string m_act(const json& v) {
  if (!v.is_number()) return kDash;
  const double x = v.get<double>();
  return fixed(x, x >= 100 ? 0 : x >= 10 ? 1 : 2);
}

std::string percent(const json& v) { return v.is_number() ? fixed(v.get<double>() * 100.0, 1) + "%" : kDash; }

// Display width of UTF-8 text (code points; the table uses no wide characters).
size_t width(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++n;
  return n;
}

std::string table(const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& left) {
  std::vector<size_t> w(rows[0].size(), 3);
  for (const auto& r : rows)
    for (size_t c = 0; c < r.size(); ++c) w[c] = std::max(w[c], width(r[c]));
  auto pad = [&](const std::string& s, size_t c) {
    const std::string fill(w[c] - width(s), ' ');
    return left[c] ? s + fill : fill + s;
  };
  std::string out;
  for (size_t i = 0; i < rows.size(); ++i) {
    out += "|";
    for (size_t c = 0; c < rows[i].size(); ++c) out += " " + pad(rows[i][c], c) + " |";
    out += "\n";
    if (i == 0) {
      out += "|";
      for (size_t c = 0; c < w.size(); ++c)
        out += left[c] ? " :" + std::string(w[c] - 1, '-') + " |" : " " + std::string(w[c] - 1, '-') + ": |";
      out += "\n";
    }
  }
  return out;
}

json run_record(const ResultsRun& r) {
  const fs::path dir(r.dir);
  const json summary = read_json_or_null((dir / "summary.json").string());
  const json heldout = read_json_or_null((dir / "heldout.json").string());
  const json analysis = read_json_or_null((dir / "analysis.json").string());
  const json config = read_json_or_null((dir / "config.json").string());
  json rec = {{"name", r.name}, {"label", r.label}, {"run_dir", r.dir}};
  std::string gate = "none", act = "-";
  if (config.is_object()) {
    try {
      const model::ModelConfig c = model::config_from_json(config, (dir / "config.json").string());
      gate = model::describe_gate(c);
      if (c.has_gate()) act = model::config_to_json(c)["gate"].value("activation", "sigmoid");
      rec["ffn_hidden"] = c.ffn_hidden;
    } catch (const Error&) {
    }
  }
  if (!act.empty() && act != "-") act[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(act[0])));
  rec["gate"] = gate;
  rec["act_func"] = act;
  rec["outcome"] = r.diverged ? "diverged" : summary.is_object() ? summary.value("outcome", "unknown") : "missing";
  rec["params"] = number_at(summary, {"params"});
  rec["steps"] = number_at(summary, {"steps"});
  rec["tokens_seen"] = number_at(summary, {"tokens_seen"});
  rec["val_loss"] = number_at(summary, {"val_loss"});
  rec["val_ppl"] = number_at(summary, {"val_ppl"});
  rec["val_bpb"] = number_at(summary, {"val_bpb"});
  rec["heldout_loss"] = number_at(heldout, {"loss"});
  rec["heldout_bpb"] = number_at(heldout, {"bpb"});
  rec["heldout_tokens"] = number_at(heldout, {"tokens"});
  rec["gate_score"] = number_at(analysis, {"gates", "mean_score"});
  rec["m_act"] = number_at(analysis, {"massive_activations", "m_act"});
  rec["f_attn"] = number_at(analysis, {"f_attn", "mean"});
  rec["sink_rate_percent"] = number_at(analysis, {"sink_rate", "percent"});
  // Share of attention-output values below 1e-2: the SDPA output after the gate (gated),
  // the SDPA output itself (baseline); mean over layers.
  json sparsity = nullptr;
  if (analysis.is_object()) {
    if (analysis.contains("gates") && analysis["gates"].is_object())
      sparsity = layer_mean(analysis["gates"].value("per_layer", json()), {"sparsity", "after", "lt_1e-2"});
    else if (analysis.contains("sdpa_output") && analysis["sdpa_output"].is_object())
      sparsity = layer_mean(analysis["sdpa_output"].value("per_layer", json()), {"sparsity", "lt_1e-2"});
  }
  rec["attn_out_sparsity_lt_1e-2"] = sparsity;
  rec["spikes"] = number_at(summary, {"spikes", "count"});
  const std::optional<double> tokens_per_s = analysis::run_tokens_per_s(dir);  // the report's figure too
  rec["tokens_per_s"] = tokens_per_s ? json(*tokens_per_s) : json(nullptr);
  rec["train_elapsed_s"] = number_at(summary, {"elapsed_s"});
  rec["analysis"] = analysis.is_object() ? json((dir / "analysis.json").string()) : json(nullptr);
  return rec;
}

json results_json(const ResultsInput& in, const json& runs) {
  auto text_or_null = [](const std::string& s) { return s.empty() ? json(nullptr) : json(s); };
  return {{"format", "gatedlm-demo-results"},
          {"format_version", 1},
          {"command", in.command},
          {"preset", in.preset},
          {"budget_minutes", in.minutes > 0 ? json(in.minutes) : json(nullptr)},
          {"corpus", in.corpus},
          {"heldout", in.heldout},
          {"heldout_note", text_or_null(in.heldout_note)},
          {"tokenizer", in.tokenizer},
          {"data", in.data},
          {"train_config", in.train_config},
          {"planned_steps", in.planned_steps > 0 ? json(in.planned_steps) : json(nullptr)},
          {"params_difference", in.param_difference},
          {"ffn_hidden", {{"baseline", in.ffn_hidden.at(0)}, {"gated", in.ffn_hidden.at(1)}}},
          {"runs", runs},
          {"report", text_or_null(in.report)},
          {"report_note", text_or_null(in.report_note)},
          {"wall_s", in.wall_s},
          {"contention", text_or_null(in.contention_note)}};
}

// The table, in the form of the paper's Table 4.
std::string table4(const json& runs, bool contended) {
  std::vector<std::vector<std::string>> rows = {{"Method", "Act-Func", "Params", "Tokens", "Gate Score", "Sparsity",
                                                 "M-Act", "F-Attn", "Val PPL", "Val BPB", "Held-out BPB", "Spikes",
                                                 contended ? "tok/s*" : "tok/s"}};
  std::vector<bool> left(rows[0].size(), false);
  left[0] = left[1] = true;
  for (const json& r : runs) {
    const bool diverged = r["outcome"] == "diverged";
    rows.push_back({r["label"].get<std::string>() + (diverged ? " (diverged)" : ""), r["act_func"],
                    count(r["params"]), short_count_or_dash(r["tokens_seen"]), fixed_or_dash(r["gate_score"], 3),
                    percent(r["attn_out_sparsity_lt_1e-2"]), m_act(r["m_act"]), fixed_or_dash(r["f_attn"], 3),
                    fixed_or_dash(r["val_ppl"], 2), fixed_or_dash(r["val_bpb"], 4), fixed_or_dash(r["heldout_bpb"], 4),
                    r["spikes"].is_number() ? std::to_string(r["spikes"].get<int64_t>()) : kDash,
                    short_count_or_dash(r["tokens_per_s"])});
  }
  return table(rows, left);
}

// Gated minus baseline, for the numbers both runs have.
std::string deltas(const json& runs) {
  std::string delta;
  if (runs.size() != 2) return delta;
  const json &b = runs[0], &g = runs[1];
  auto d = [&](const char* key, const char* name, int digits) {
    if (!b[key].is_number() || !g[key].is_number()) return;
    if (!delta.empty()) delta += ", ";
    delta += cat(name, " ", fixed_or_dash(b[key], digits), " -> ", fixed_or_dash(g[key], digits), " (",
                 signed_fixed(g[key].get<double>() - b[key].get<double>(), digits), ")");
  };
  d("val_bpb", "val BPB", 4);
  d("heldout_bpb", "held-out BPB", 4);
  d("f_attn", "F-Attn", 3);
  if (b["m_act"].is_number() && g["m_act"].is_number())
    d("m_act", "M-Act", std::min(b["m_act"].get<double>(), g["m_act"].get<double>()) >= 10 ? 1 : 2);
  d("sink_rate_percent", "sink rate %", 1);
  return delta;
}

// "- Corpus: ..." or, for synthetic data, "- Data: ...".
std::string data_line(const ResultsInput& in) {
  const json& tc = in.train_config;
  const std::string corpus_text =
      in.corpus.value("source", "") == "npm"
          ? cat("State of the Union addresses (npm ", in.corpus.value("package", ""), ", ",
                in.corpus.value("files", json(0)).get<int64_t>(), " documents, ",
                fixed(in.corpus.value("bytes", json(0)).get<double>() / 1e6, 1), " MB)")
          : cat("your text ", in.corpus.value("path", ""));
  const std::string train_tokens = thousands(in.data.value("train_tokens", json(0)).get<int64_t>());
  const std::string val_tokens = thousands(in.data.value("val_tokens", json(0)).get<int64_t>());
  const json synthetic = in.data.value("synthetic", json());
  if (!synthetic.is_object())
    return cat("- Corpus: ", corpus_text, "; SentencePiece BPE, ",
               in.tokenizer.value("vocab_size", json(0)).get<int64_t>(), " pieces; validation = the last ",
               fixed(in.data.value("val_fraction", json(0.0)).get<double>() * 100, 0),
               "% of every document (", val_tokens, " tokens, of which the first ",
               thousands(tc.value("eval_tokens", int64_t{0})), " are evaluated).\n");
  std::string triggers;  // demo/synthetic_data.h: generated from the corpus's statistics
  for (const json& t : synthetic.value("triggers", json::array()))
    triggers += cat(triggers.empty() ? "" : ", ", json(t.value("text", std::string())).dump());
  return cat("- Data: ", synthetic.value("task", std::string()), " chains over the ",
             synthetic.value("symbols", json(0)).get<int64_t>(), " ",
             in.tokenizer.value("type", std::string()) == "byte" ? "bytes" : "tokens", " of ", corpus_text,
             ", with its bigram statistics; triggers ", triggers, " (",
             fixed(100.0 * synthetic.value("trigger_share", json(0.0)).get<double>(), 1),
             "% of positions) are followed by a copy of the symbol before them; ", train_tokens, " training and ",
             val_tokens, " validation tokens, every window BOS + a stretch of one chain.\n");
}

// "- Training, identical for both: ...": the steps that ran, and the plan's when a re-plan cut them.
std::string training_line(const ResultsInput& in) {
  const json& tc = in.train_config;
  const int64_t ran = tc.value("steps", int64_t{0});
  const std::string cut =
      in.planned_steps > 0 && in.planned_steps != ran
          ? cat(" (", in.planned_steps, " were planned from the speed probe; the machine's speed changed, so the "
                "budget was re-planned as it trained and the cosine ends at step ", ran, ")")
          : "";
  return cat("- Training, identical for both: seed ", tc.value("seed", 0), ", the same batches in the same order, ",
             ran, " steps x ", tc.value("batch_size", 0), " x ", tc.value("seq_len", 0), " tokens",
             tc.value("grad_accum", 1) > 1 ? cat(" x ", tc.value("grad_accum", 1)) : "", cut, ", AdamW lr ",
             tc.value("lr", 0.0), " (", tc.value("warmup", 0), " warmup steps, cosine to ", tc.value("min_lr", 0.0),
             "), weight decay ", tc.value("weight_decay", 0.0), ", clip ", tc.value("clip", 0.0),
             in.minutes > 0 ? cat("; steps chosen to fit a ", in.minutes, "-minute budget") : "", ".\n");
}

std::string parameters_line(const ResultsInput& in, const json& runs) {
  // An all-MoE preset (ffn_hidden 0) keeps every expert: the totals differ by the gate, as
  // in the paper's MoE rows.
  const bool narrowed = in.ffn_hidden.at(0) != in.ffn_hidden.at(1) || in.ffn_hidden.at(0) > 0;
  const json& b0 = runs.empty() ? json() : runs[0];
  const std::string share = b0.is_object() && b0["params"].is_number()
                                ? cat(" (", signed_fixed(100.0 * static_cast<double>(in.param_difference) /
                                                             b0["params"].get<double>(), 3), "%)")
                                : "";
  return cat("- Parameters: ",
             narrowed ? cat("the gated model's FFN is narrowed (ffn_hidden ", in.ffn_hidden.at(0), " -> ",
                            in.ffn_hidden.at(1), ") so the totals match")
                      : std::string("the gated model adds the gate (the MoE experts are not narrowed)"),
             "; difference ", in.param_difference >= 0 ? "+" : "", thousands(in.param_difference), share, ".\n");
}

std::string setup_lines(const ResultsInput& in, const json& runs) {
  std::string heldout;
  if (!in.heldout_name.empty()) {
    const json ht = runs.empty() ? json() : runs[0]["heldout_tokens"];
    heldout = cat("- Held-out domain: ", in.heldout_name, " (", ht.is_number() ? thousands(ht.get<int64_t>()) : "?",
                  " tokens from its start), a text neither model nor tokenizer was trained on.\n");
  } else {
    heldout = cat("- Held-out domain: none (", in.heldout_note, ").\n");
  }
  return data_line(in) + heldout + training_line(in) + parameters_line(in, runs);
}

constexpr const char* kColumns =
    "Columns: Gate Score = mean sigmoid gate score over layers (lower = sparser gate); Sparsity = share of "
    "attention-output values (after the gate) with |v| < 1e-2, mean over layers; M-Act = mean over layers of the "
    "largest |h| in the residual stream (massive activations); F-Attn = mean attention of queries t >= 1 on the "
    "first token (attention sink); PPL and BPB on the validation split; Held-out BPB on the second domain (bits "
    "per byte are comparable across tokenizers); Spikes = training steps whose loss jumped > 20% over the median "
    "of the previous 100; tok/s = training throughput.";
constexpr const char* kCaveat =
    "These are the numbers this run measured: one seed, a tiny model and a few minutes of training. Small "
    "differences can be noise; the paper's own numbers come from 15B-parameter MoE and 1.7B dense models trained "
    "on hundreds of billions of tokens.";

struct Parts {
  std::string table, delta, setup;
};

std::string markdown(const ResultsInput& in, const json& runs, const Parts& p) {
  std::string md = "# gatedlm demo: baseline vs SDPA-output gated attention\n\n";
  std::string train_times;
  for (const json& r : runs)
    if (r["train_elapsed_s"].is_number())
      train_times += cat(train_times.empty() ? "" : ", ", r["name"].get<std::string>(), " ",
                         Progress::format_duration(r["train_elapsed_s"].get<double>()));
  md += cat("Measured by `", in.command, "` (preset `", in.preset, "`). This invocation took ",
            Progress::format_duration(in.wall_s), train_times.empty() ? "" : "; training took " + train_times,
            " (stages already done are reused, so a repeated invocation is quick).\n\n");
  md += p.table + "\n";
  if (!in.contention_note.empty()) md += "\\* " + in.contention_note + ".\n\n";
  if (!p.delta.empty()) md += "Gated vs baseline: " + p.delta + ".\n\n";
  md += p.setup + "\n" + kColumns + "\n\n" + kCaveat + "\n\n";
  if (!in.report.empty()) md += cat("Report: `", in.report, "`\n");
  if (!in.report_note.empty()) md += cat("Report: ", in.report_note, "\n");
  return md;
}

std::string terminal(const ResultsInput& in, const Parts& p) {
  std::string t = "\nTable 4 in miniature: baseline vs SDPA elementwise sigmoid gate (G1), measured here\n\n";
  t += p.table + "\n";
  if (!in.contention_note.empty()) t += "* " + in.contention_note + ".\n";
  if (!p.delta.empty()) t += "Gated vs baseline: " + p.delta + ".\n";
  t += p.setup;
  if (!in.report.empty()) t += cat("\nReport: ", in.report, "\n");
  t += cat("Table and notes: ", (fs::path(in.out_dir) / "results.md").string(), " and results.json\n");
  return t;
}

}  // namespace

Results collect_results(const ResultsInput& in) {
  json runs = json::array();
  for (const auto& r : in.runs) runs.push_back(run_record(r));
  Results res;
  res.json = results_json(in, runs);
  res.json_text = res.json.dump(2) + "\n";
  const Parts parts{table4(runs, !in.contention_note.empty()), deltas(runs), setup_lines(in, runs)};
  res.markdown = markdown(in, runs, parts);
  res.terminal = terminal(in, parts);
  return res;
}

}  // namespace gatedlm::demo
