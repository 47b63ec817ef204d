#include "analysis/report_html.h"

#include <algorithm>
#include <sstream>

#include "analysis/expert_load.h"
#include "analysis/report_stream_eval.h"
#include "core/error.h"

namespace gatedlm::analysis {

using nlohmann::json;

namespace {

const char* const kStyle =
    "body{font-family:sans-serif;margin:2em;max-width:1200px;color:#222}\n"
    "table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ccc;padding:4px 8px;text-align:right}\n"
    "th{background:#f3f3f3}td.l,th.l{text-align:left}\n"
    "figure{display:inline-block;margin:0.5em;vertical-align:top}figcaption{font-size:90%;max-width:760px}\n"
    "img{border:1px solid #eee}.note{color:#777}.sw{display:inline-block;width:0.9em;height:0.9em;"
    "margin-right:0.4em;vertical-align:middle}\n";

std::string note_html(const std::string& text) { return "<p class=\"note\">" + std::string(kDash) + " " + html_escape(text) + "</p>\n"; }

// The figure `name`, else the note under `note_key` (nothing when there is neither).
std::string figure_or_note(const FigureSet& set, const std::string& name, const std::string& note_key) {
  if (const Figure* f = set.find(name)) return figure_html(*f);
  if (auto it = set.notes.find(note_key); it != set.notes.end()) return note_html(it->second);
  return "";
}

// A sweep's section with its figures where it placed them ("@@FIGURE:name@@").
std::string sweep_html(const SweepPage& page, const FigureSet& set) {
  std::string out, html = page.html;
  for (size_t at; (at = html.find("@@FIGURE:")) != std::string::npos;) {
    const size_t end = html.find("@@", at + 9);
    const std::string name = html.substr(at + 9, end - at - 9);
    out += html.substr(0, at);
    if (const Figure* f = set.find(name)) out += figure_html(*f);
    html = html.substr(end + 2);
  }
  return out + html;
}

std::string probes_html(const FigureSet& set) {
  std::string h = "<h2>Probes during training</h2>\n";
  if (!set.find("probe_f_attn")) return h + figure_or_note(set, "", "probes");
  for (const char* name : {"probe_f_attn", "probe_sink_rate", "probe_m_act", "probe_gate_mean"})
    h += figure_or_note(set, name, "");
  return h;
}

// Attention sink, massive activations, gates and sparsity, expert load.
std::string analysis_html(const std::vector<ReportRun>& runs, const FigureSet& set) {
  const bool any_analysis = std::any_of(runs.begin(), runs.end(), [](const ReportRun& r) { return r.analysis.is_object(); });
  const bool any_gate = std::any_of(runs.begin(), runs.end(), has_gates);
  std::ostringstream h;
  h << "<h2>Attention sink</h2>\n";
  if (any_analysis) {
    h << figure_or_note(set, "f_attn_per_layer", "analysis");
    bool maps = false;
    for (const Figure& f : set.figures)
      if (f.name.rfind("attention_map_", 0) == 0) {
        h << figure_html(f);
        maps = true;
      }
    if (!maps) h << note_html("no attention maps in the analyses");
  } else {
    h << figure_or_note(set, "", "analysis");
  }
  h << "<h2>Massive activations</h2>\n" << figure_or_note(set, "top_activation", "analysis");
  h << "<h2>Gates and SDPA-output sparsity</h2>\n";
  if (any_gate) h << figure_or_note(set, "gate_mean_per_layer", "gates") << figure_or_note(set, "gate_histogram", "gates");
  else h << figure_or_note(set, "", "gates");
  for (const char* name : {"mean_abs_y", "sparsity_1e-2", "sparsity_1e-3"}) h << figure_or_note(set, name, "analysis");
  std::vector<std::pair<std::string, json>> loads;
  for (const ReportRun& r : runs) loads.push_back({html_escape(r.label), r.analysis});
  expert_load_table(h, loads);
  return h.str();
}

std::string streaming_html(const std::vector<ReportRun>& runs) {
  std::string h = "<h2>Streaming windows</h2>\n";
  std::vector<std::pair<std::string, json>> streams;
  for (const ReportRun& r : runs)
    if (r.stream_eval.is_object()) streams.emplace_back(r.label, r.stream_eval);
  if (streams.empty())
    return h + note_html("no streaming-window evaluation among the inputs (run `gatedlm stream-eval --json` and save "
                         "it as RUN/stream_eval.json, or pass the JSON file)");
  return h +
         "<p>Perplexity of a text longer than the training length through a rolling KV cache of the last W tokens "
         "plus K sink tokens (StreamingLLM; positions inside the cache), beside the full cache. A model that parks "
         "attention on the first tokens blows up at K = 0; in parentheses: the tokens scored after the window "
         "filled.</p>\n" +
         stream_eval_table_html(streams);
}

std::string input_row_html(const ReportRun& r) {
  auto a_int = [&](const char* key) -> std::string {
    return r.analysis.is_object() && r.analysis.contains(key) && r.analysis[key].is_number() ? r.analysis[key].dump()
                                                                                             : kDash;
  };
  std::string source = kDash;
  if (r.analysis.is_object() && r.analysis.contains("source") && r.analysis["source"].is_object()) {
    const json& s = r.analysis["source"];
    source = s.value("kind", "") == "data" ? cat(s.value("dir", ""), " (", s.value("split", ""), ")")
                                           : s.value("file", std::string(kDash));
    source += cat(", tokenizer ", s.value("tokenizer", "?"));
  }
  std::ostringstream h;
  h << "<tr><td class=\"l\">" << html_escape(r.label) << "</td><td class=\"l\">" << html_escape(r.path)
    << (r.is_dir ? " (run)" : "") << "</td><td class=\"l\">"
    << (r.analysis_path.empty() ? std::string(kDash) : html_escape(r.analysis_path)) << "</td><td>"
    << a_int("sequences") << "</td><td>" << a_int("seq_len") << "</td><td>" << a_int("seed") << "</td><td class=\"l\">"
    << html_escape(source) << "</td><td>" << (r.is_dir ? std::to_string(r.train.size()) : kDash) << "</td><td>"
    << (r.is_dir ? std::to_string(r.val.size()) : kDash) << "</td></tr>\n";
  return h.str();
}

std::string inputs_html(const std::vector<ReportRun>& runs) {
  std::string h =
      "<h2>Inputs</h2>\n<table>\n<tr><th class=\"l\">Name</th><th class=\"l\">Input</th><th class=\"l\">Analysis</th>"
      "<th>Sequences</th><th>Seq len</th><th>Seed</th><th class=\"l\">Sequence source</th><th>Train records</th>"
      "<th>Eval records</th></tr>\n";
  for (const ReportRun& r : runs) h += input_row_html(r);
  return h + "</table>\n";
}

std::string warnings_html(const std::vector<std::string>& warnings) {
  if (warnings.empty()) return "";
  std::string h = "<h2>Warnings</h2>\n<ul>\n";
  for (const std::string& w : warnings) h += "<li>" + html_escape(w) + "</li>\n";
  return h + "</ul>\n";
}

}  // namespace

std::string figure_html(const Figure& f) {
  std::ostringstream h;
  h << "<figure><a href=\"figures/" << f.name << ".svg\"><img src=\"figures/" << f.name << ".png\" width=\"" << f.width
    << "\" height=\"" << f.height << "\" alt=\"" << html_escape(f.name) << "\"></a><figcaption>"
    << html_escape(f.caption) << " (<a href=\"figures/" << f.name << ".svg\">SVG</a>)</figcaption></figure>\n";
  return h.str();
}

std::string summary_table_html(const std::vector<ReportRun>& runs) {
  std::ostringstream h;
  h << "<h2>Summary</h2>\n<p>In the style of the paper's Table 4. Gate score: mean over layers of the mean gate "
       "score; M-Act: mean over layers of the largest |h| after each block; F-Attn: attention on the first token, "
       "rows t &ge; 1; sink rate: Gu et al., eps 0.3; tokens/s: training throughput over every step of "
       "metrics.jsonl. " << kDash << ": not available for that input.</p>\n"
    << "<table>\n<tr><th class=\"l\">Method</th><th class=\"l\">Gate</th><th>Gate score</th><th>M-Act</th>"
       "<th>F-Attn</th><th>Sink rate %</th><th>Val loss</th><th>PPL</th><th>BPB</th><th>Spikes</th>"
       "<th>Tokens/s</th></tr>\n";
  for (const ReportRun& r : runs) {
    const std::string variant = gate_variant(r);
    const std::optional<double> m_act = analysis_number(r, {"massive_activations", "m_act"});
    h << "<tr><td class=\"l\"><span class=\"sw\" style=\"background:" << r.color << "\"></span>"
      << html_escape(r.label) << "</td><td class=\"l\">"
      << (variant.empty() ? kDash : variant == "none" ? "none (baseline)" : html_escape(variant)) << "</td><td>"
      << fmt(analysis_number(r, {"gates", "mean_score"}), "%.3f") << "</td><td>"
      << fmt(m_act, m_act && *m_act >= 100 ? "%.0f" : "%.3g") << "</td><td>"
      << fmt(analysis_number(r, {"f_attn", "mean"}), "%.3f") << "</td><td>"
      << fmt(analysis_number(r, {"sink_rate", "percent"}), "%.1f") << "</td><td>"
      << fmt(eval_number(r, "val_loss"), "%.4f") << "</td><td>" << fmt(eval_number(r, "val_ppl"), "%.3f")
      << "</td><td>" << fmt(eval_number(r, "val_bpb"), "%.4f") << "</td><td>" << fmt(spike_count(r), "%.0f")
      << "</td><td>" << fmt(r.tokens_per_s, "%.0f") << "</td></tr>\n";
  }
  h << "</table>\n";
  return h.str();
}

std::string report_html(const ReportPage& page) {
  const FigureSet& set = page.figures;
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" << html_escape(page.title)
    << "</title>\n<style>\n" << kStyle << "</style>\n</head>\n<body>\n<h1>" << html_escape(page.title) << "</h1>\n";
  for (const SweepPage& sweep : page.sweeps) h << sweep_html(sweep, set);
  h << summary_table_html(page.runs);
  h << "<h2>Training</h2>\n" << figure_or_note(set, "train_loss", "train_loss") << figure_or_note(set, "val_loss", "val_loss");
  h << probes_html(set) << analysis_html(page.runs, set);
  h << "<h2>Long context</h2>\n"
    << figure_or_note(set, "longctx_ppl", "longctx") << figure_or_note(set, "longctx_accuracy", "longctx_accuracy");
  h << streaming_html(page.runs) << inputs_html(page.runs) << warnings_html(page.warnings);
  h << "<p class=\"note\">Generated by gatedlm report. Figures drawn with gnuplot; the numbers plotted and the "
       "script are in data/.</p>\n</body>\n</html>\n";
  return h.str();
}

}  // namespace gatedlm::analysis
