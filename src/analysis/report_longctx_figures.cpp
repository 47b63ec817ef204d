// The report's long-context figures: perplexity and retrieval scores of `gatedlm longctx`
// results by evaluation length (report_figures.h).
#include <cmath>
#include <string>

#include "analysis/report_figures.h"
#include "core/error.h"

namespace gatedlm::analysis {

using nlohmann::json;

namespace {

const char* const kTasks[] = {"passkey", "niah_single", "niah_multikey", "niah_multivalue"};

// One row per length: length, ppl, then each task's score (NaN when it was skipped).
// `scaling` becomes the RoPE scaling the result used.
DataTable longctx_table(const json& lc, size_t i, std::string& scaling) {
  std::vector<std::string> columns = {"length", "ppl"};
  for (const char* t : kTasks) columns.push_back(t);
  DataTable table(cat("longctx_", i), columns);
  scaling = "none";
  for (const json& L : lc["lengths"]) {
    if (!L.is_object()) continue;
    if (L.contains("rope") && L["rope"].is_object()) scaling = L["rope"].value("scaling", scaling);
    const json perplexity = L.value("perplexity", json());
    std::vector<double> row = {jnum(L.value("length", json())),
                               perplexity.is_object() ? jnum(perplexity.value("ppl", json())) : NAN};
    const json tasks = L.value("tasks", json());
    for (const char* t : kTasks) {
      const json task = tasks.is_object() ? tasks.value(t, json()) : json();
      row.push_back(task.is_object() ? jnum(task.value("score", json())) : NAN);
    }
    table.add_row(row);
  }
  return table;
}

// Whether any task has a score at some length (tasks are skipped at lengths too short for them).
bool any_task_scored(const DataTable& t) {
  for (size_t r = 0; r < t.rows(); ++r)
    for (size_t c = 2; c < t.columns().size(); ++c)
      if (t.row(r)[c] != "NaN") return true;
  return false;
}

}  // namespace

FigureSet longctx_figures(const std::vector<ReportRun>& runs) {
  FigureSet set;
  Figure ppl{"longctx_ppl", "Long context: perplexity of held-out text at each evaluation length"};
  Figure acc{"longctx_accuracy",
             "Long context: share of expected values recovered (teacher-forced) by length; one dash style per task"};
  const std::string length_axis = "set logscale x 2\nset xlabel 'evaluation length (tokens)'\nset format x '%g'\n";
  ppl.setup = length_axis + "set ylabel 'perplexity'\n";
  acc.setup = length_axis + "set ylabel 'score'\nset yrange [-0.02:1.02]\nset key outside right\n";
  acc.width = 960;
  bool scored = false;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!runs[i].longctx.is_object()) continue;
    std::string scaling;
    DataTable t = longctx_table(runs[i].longctx, i, scaling);
    const std::string label = runs[i].label + " (" + scaling + ")", &color = runs[i].color;
    ppl.elements.push_back(t.plot({"length", "ppl"}) + " with linespoints pt 7 ps 0.7 lw 2 lc rgb '" + color +
                           "' title " + gp_str(label));
    for (int k = 0; k < 4; ++k)
      acc.elements.push_back(t.plot({"length", kTasks[k]}) + cat(" with linespoints pt ", 5 + k, " ps 0.7 lw 2 dt ",
                                                                  k + 1, " lc rgb '", color, "' title ") +
                             gp_str(label + " " + kTasks[k]));
    scored |= any_task_scored(t);
    set.tables.push_back(std::move(t));
  }
  if (ppl.elements.empty()) {
    set.notes["longctx"] = "no long-context evaluation among the inputs (run `gatedlm longctx` and pass its JSON)";
    return set;
  }
  set.figures.push_back(std::move(ppl));
  if (scored) set.figures.push_back(std::move(acc));
  else set.notes["longctx_accuracy"] = "no retrieval task has a score in the long-context results (each was skipped at every length, too short "
        "for it, or the evaluation ran with --samples 0)";
  return set;
}

}  // namespace gatedlm::analysis
