// analysis/report_figures.h on hand-built runs: each figure kind's data table has the
// named columns and the rows of its input, its plot elements read those names, and a
// kind with nothing to draw leaves a note saying why.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "analysis/report_figures.h"

namespace gatedlm::analysis {
namespace {

using nlohmann::json;

ReportRun run_named(const std::string& label, const std::string& color) {
  ReportRun r;
  r.label = label;
  r.path = "/runs/" + label;
  r.color = color;
  r.is_dir = true;
  return r;
}

bool any_element_has(const Figure& f, const std::string& text) {
  for (const std::string& e : f.elements)
    if (e.find(text) != std::string::npos) return true;
  return false;
}

TEST(ReportTrainingFigures, LossTableHasStepLossAndEmaAndSpikesTheirOwn) {
  ReportRun r = run_named("gated", "#d62728");
  r.has_metrics = true;
  r.train = {{1, 4.0}, {2, 2.0}, {3, 3.0}};
  r.spike_steps = {3};
  r.val = {{2, 2.5}};
  const FigureSet set = training_figures({r});
  const DataTable* t = set.table("train_0");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->columns(), (std::vector<std::string>{"step", "loss", "loss_ema"}));
  ASSERT_EQ(t->rows(), 3u);
  // EMA 0.9 from the first loss: 4, 0.9*4 + 0.1*2 = 3.8, 0.9*3.8 + 0.1*3 = 3.72.
  EXPECT_EQ(t->row(1), (std::vector<std::string>{"2", "2", "3.8"}));
  EXPECT_EQ(t->row(2), (std::vector<std::string>{"3", "3", "3.72"}));
  const DataTable* spikes = set.table("spikes_0");
  ASSERT_NE(spikes, nullptr);
  EXPECT_EQ(spikes->text(), "step loss\n3 3\n");
  const DataTable* val = set.table("val_0");
  ASSERT_NE(val, nullptr);
  EXPECT_EQ(val->text(), "step val_loss\n2 2.5\n");
  const Figure* loss = set.find("train_loss");
  ASSERT_NE(loss, nullptr);
  EXPECT_TRUE(any_element_has(*loss, "'data/train_0.dat' using 'step':'loss_ema'"));
  EXPECT_TRUE(any_element_has(*loss, "'data/spikes_0.dat' using 'step':'loss'"));
  EXPECT_TRUE(set.notes.empty());
}

TEST(ReportTrainingFigures, NoMetricsLeavesNotes) {
  const FigureSet set = training_figures({run_named("analysis_only", "#1f77b4")});
  EXPECT_TRUE(set.figures.empty());
  EXPECT_TRUE(set.notes.count("train_loss"));
  EXPECT_TRUE(set.notes.count("val_loss"));
}

TEST(ReportProbeFigures, DrawEachProbeOverTheStepsAndSkipABaselinesGateMean) {
  ReportRun gated = run_named("gated", "#1f77b4"), baseline = run_named("baseline", "#d62728");
  gated.probes = {{10, 0.4, 50, 120, 0.3}, {20, 0.2, 25, 60, 0.25}};
  baseline.probes = {{10, 0.6, 75, 300, NAN}};
  const FigureSet set = probe_figures({gated, baseline});
  const DataTable* t = set.table("probes_0");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->text(), "step f_attn sink_rate_percent m_act gate_mean\n10 0.4 50 120 0.3\n20 0.2 25 60 0.25\n");
  ASSERT_NE(set.table("probes_1"), nullptr);
  for (const char* name : {"probe_f_attn", "probe_sink_rate", "probe_m_act", "probe_gate_mean"})
    ASSERT_NE(set.find(name), nullptr) << name;
  EXPECT_EQ(set.find("probe_f_attn")->elements.size(), 2u);
  EXPECT_TRUE(any_element_has(*set.find("probe_m_act"), "using 'step':'m_act'"));
  EXPECT_EQ(set.find("probe_gate_mean")->elements.size(), 1u);  // the baseline has no gate
  EXPECT_FALSE(set.notes.count("probes"));
}

TEST(ReportProbeFigures, WithoutProbesTheNoteNamesTheRunsNotAFlagToPass) {
  ReportRun demo_run = run_named("demo-baseline", "#1f77b4");
  demo_run.has_metrics = true;
  demo_run.train = {{1, 3.0}};
  const FigureSet set = probe_figures({demo_run, run_named("bare.json", "#d62728")});
  EXPECT_TRUE(set.figures.empty());
  const std::string note = set.notes.at("probes");
  EXPECT_NE(note.find("demo-baseline"), std::string::npos) << note;
  EXPECT_EQ(note.find("bare.json"), std::string::npos) << note;  // it has no training log at all
  EXPECT_EQ(note.find("train with"), std::string::npos) << note;
  EXPECT_NE(probe_figures({run_named("x", "#1f77b4")}).notes.at("probes").find("no training log"), std::string::npos);
}

json two_layer_analysis(bool gated) {
  json a{{"format", "gatedlm-analysis"},
         {"f_attn", {{"per_layer", {0.1, 0.7}}}},
         {"f_attn_all_rows", {{"per_layer", {0.15, 0.75}}}},
         {"massive_activations",
          {{"per_layer", {{{"top3", {9.0, 8.0, 7.0}}, {"median", 0.5}, {"massive_count", 0}},
                          {{"top3", {900.0, 80.0, 70.0}}, {"median", 0.25}, {"massive_count", 2}}}}}},
         {"sdpa_output", {{"per_layer", {{{"mean_abs", 0.2}, {"sparsity", {{"lt_1e-2", 0.05}, {"lt_1e-3", 0.005}}}},
                                         {{"mean_abs", 0.3}, {"sparsity", {{"lt_1e-2", 0.04}, {"lt_1e-3", 0.004}}}}}}}}};
  if (gated) {
    json layer = {{"mean_score", 0.25},
                  {"mean_abs_y", 0.2},
                  {"mean_abs_y_gated", 0.05},
                  {"sparsity", {{"before", {{"lt_1e-2", 0.1}, {"lt_1e-3", 0.01}}},
                                {"after", {{"lt_1e-2", 0.4}, {"lt_1e-3", 0.04}}},
                                {"mean_scaled_control", {{"lt_1e-2", 0.3}, {"lt_1e-3", 0.03}}}}},
                  {"histogram", {{"share", {0.5, 0.5}}}}};
    a["gates"] = {{"mean_score", 0.25}, {"per_layer", {layer, layer}}};
  }
  return a;
}

TEST(ReportLayerFigures, TheLayerTableNamesEveryColumnTheFiguresRead) {
  ReportRun gated = run_named("gated", "#1f77b4"), baseline = run_named("baseline", "#d62728");
  gated.analysis = two_layer_analysis(true);
  baseline.analysis = two_layer_analysis(false);
  const FigureSet set = layer_figures({gated, baseline});
  const DataTable* t = set.table("layers_0");
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->rows(), 2u);
  auto cell = [&](const DataTable& table, size_t row, const std::string& column) {
    const auto& cols = table.columns();
    const size_t c = static_cast<size_t>(std::find(cols.begin(), cols.end(), column) - cols.begin());
    EXPECT_LT(c, cols.size()) << column;
    return c < cols.size() ? table.row(row)[c] : std::string();
  };
  EXPECT_EQ(cell(*t, 1, "layer"), "1");
  EXPECT_EQ(cell(*t, 1, "f_attn"), "0.7");
  EXPECT_EQ(cell(*t, 1, "top1"), "900");
  EXPECT_EQ(cell(*t, 1, "median"), "0.25");
  EXPECT_EQ(cell(*t, 0, "gate_mean"), "0.25");
  EXPECT_EQ(cell(*t, 0, "y_gated_lt_1e-2"), "0.4");
  EXPECT_EQ(cell(*t, 0, "control_lt_1e-3"), "0.03");
  EXPECT_EQ(cell(*t, 0, "sdpa_lt_1e-3"), "0.005");
  EXPECT_EQ(cell(*set.table("layers_1"), 0, "gate_mean"), "NaN");  // the baseline has no gate
  for (const char* name : {"f_attn_per_layer", "top_activation", "mean_abs_y", "sparsity_1e-2", "sparsity_1e-3",
                           "gate_mean_per_layer", "gate_histogram"})
    ASSERT_NE(set.find(name), nullptr) << name;
  EXPECT_TRUE(any_element_has(*set.find("gate_mean_per_layer"), "'data/layers_0.dat' using 'layer':'gate_mean'"));
  EXPECT_TRUE(any_element_has(*set.find("sparsity_1e-3"), "'data/layers_1.dat' using 'layer':'sdpa_lt_1e-3'"));
  EXPECT_TRUE(any_element_has(*set.find("top_activation"), "using 'layer':'top1'"));
  EXPECT_EQ(set.table("gate_hist_0")->text(), "score share\n0.25 0.5\n0.75 0.5\n");
  EXPECT_EQ(set.table("gate_hist_1"), nullptr);
  for (const Figure& f : set.figures)
    for (const std::string& e : f.elements) EXPECT_EQ(e.find("using 1:"), std::string::npos) << e;
}

// A model with learned sink logits gets their per-layer mass plotted beside its F-Attn; a
// model without (sink_logit_mass null) gets nothing in that figure, and with none it is left out.
TEST(ReportLayerFigures, TheSinkLogitMassOfModelsWithSinks) {
  ReportRun sinks = run_named("sinks", "#1f77b4"), baseline = run_named("baseline", "#d62728");
  sinks.analysis = two_layer_analysis(false);
  sinks.analysis["sink_logit_mass"] = {{"per_layer", {0.05, 0.6}}, {"mean", 0.325}};
  baseline.analysis = two_layer_analysis(false);
  baseline.analysis["sink_logit_mass"] = nullptr;
  const FigureSet set = layer_figures({sinks, baseline});
  const Figure* f = set.find("sink_logit_mass_per_layer");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(any_element_has(*f, "'data/layers_0.dat' using 'layer':'sink_logit_mass'"));
  EXPECT_FALSE(any_element_has(*f, "layers_1.dat"));
  const DataTable* t = set.table("layers_0");
  const auto& cols = t->columns();
  const size_t c = static_cast<size_t>(std::find(cols.begin(), cols.end(), "sink_logit_mass") - cols.begin());
  ASSERT_LT(c, cols.size());
  EXPECT_EQ(t->row(1)[c], "0.6");
  EXPECT_EQ(layer_figures({baseline}).find("sink_logit_mass_per_layer"), nullptr);
}

TEST(ReportLayerFigures, WithoutAnalysesOrGatesNotesSayWhy) {
  EXPECT_TRUE(layer_figures({run_named("r", "#1f77b4")}).notes.count("analysis"));
  ReportRun baseline = run_named("baseline", "#1f77b4");
  baseline.analysis = two_layer_analysis(false);
  const FigureSet set = layer_figures({baseline});
  EXPECT_EQ(set.find("gate_mean_per_layer"), nullptr);
  EXPECT_TRUE(set.notes.count("gates"));
  EXPECT_NE(set.find("f_attn_per_layer"), nullptr);
}

TEST(ReportAttentionMapFigures, OneHeatmapPerKeptLayerInLayerOrder) {
  ReportRun r = run_named("gated", "#1f77b4");
  r.analysis = {{"attention_maps", {{"10", {{1.0, 0.0}, {0.5, 0.5}}}, {"2", {{1.0}}}, {"bad", {{1.0}}}}}};
  const FigureSet set = attention_map_figures({r});
  ASSERT_EQ(set.figures.size(), 2u);
  EXPECT_EQ(set.figures[0].name, "attention_map_0_layer2");
  EXPECT_EQ(set.figures[1].name, "attention_map_0_layer10");
  EXPECT_EQ(set.matrices.at("attention_map_0_layer10"), "1 0\n0.5 0.5\n");
}

TEST(ReportLongctxFigures, AccuracyFigureOnlyWhenATaskHasAScore) {
  auto result = [](bool scored) {
    json lengths = json::array();
    for (int len : {64, 128}) {
      json tasks = {{"passkey", scored ? json{{"score", 0.5}} : json{{"skipped", "too short"}}},
                    {"niah_single", {{"skipped", "too short"}}}};
      lengths.push_back({{"length", len}, {"perplexity", {{"ppl", 30.0}}}, {"tasks", tasks}});
    }
    return json{{"lengths", lengths}, {"rope_override", json::object()}};
  };
  ReportRun r = run_named("lc", "#1f77b4");
  r.longctx = result(true);
  FigureSet set = longctx_figures({r});
  EXPECT_EQ(set.table("longctx_0")->text(),
            "length ppl passkey niah_single niah_multikey niah_multivalue\n64 30 0.5 NaN NaN NaN\n128 30 0.5 NaN NaN NaN\n");
  EXPECT_NE(set.find("longctx_accuracy"), nullptr);
  r.longctx = result(false);  // every task skipped: gnuplot would refuse an all-missing plot
  set = longctx_figures({r});
  EXPECT_NE(set.find("longctx_ppl"), nullptr);
  EXPECT_EQ(set.find("longctx_accuracy"), nullptr);
  EXPECT_TRUE(set.notes.count("longctx_accuracy"));
  EXPECT_TRUE(longctx_figures({run_named("none", "#1f77b4")}).notes.count("longctx"));
}

}  // namespace
}  // namespace gatedlm::analysis
