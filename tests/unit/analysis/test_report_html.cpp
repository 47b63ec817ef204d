// analysis/report_html.h on hand-built runs and figures: the page shows each figure (its
// PNG linking its SVG), the notes of sections without one, the summary table with the
// run's one tokens/s figure, and nothing from elsewhere.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "analysis/report_html.h"

namespace gatedlm::analysis {
namespace {

using nlohmann::json;

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

TEST(ReportHtml, AFigureIsItsPngLinkingItsSvgWithAnEscapedCaption) {
  Figure f{"train_loss", "Loss <raw> & EMA"};
  const std::string h = figure_html(f);
  EXPECT_NE(h.find("<a href=\"figures/train_loss.svg\"><img src=\"figures/train_loss.png\" width=\"760\" "
                   "height=\"520\""),
            std::string::npos)
      << h;
  EXPECT_NE(h.find("Loss &lt;raw&gt; &amp; EMA"), std::string::npos) << h;
}

TEST(ReportHtml, SummaryRowShowsTheRunsThroughputAndDashesForWhatItLacks) {
  ReportRun r;
  r.label = "gated <1>";
  r.color = "#1f77b4";
  r.tokens_per_s = 4123.4;
  r.summary = {{"val_loss", 2.5}, {"tokens_per_s", 5216.0}};  // the last segment's: not shown
  const std::string h = summary_table_html({r});
  EXPECT_NE(h.find("gated &lt;1&gt;"), std::string::npos) << h;
  EXPECT_NE(h.find("<td>2.5000</td>"), std::string::npos) << h;
  EXPECT_NE(h.find("<td>4123</td></tr>"), std::string::npos) << h;
  EXPECT_EQ(h.find("5216"), std::string::npos) << h;
  EXPECT_GE(count(h, "<td>\u2014</td>"), 4u) << h;  // no analysis: gate score, M-Act, F-Attn, sink rate
}

TEST(ReportHtml, PageHasEachFigureOnceAndTheNotesOfEmptySections) {
  ReportRun r;
  r.label = "run";
  r.path = "/runs/run";
  r.color = "#1f77b4";
  r.is_dir = true;
  r.train = {{1, 3.0}};
  FigureSet set;
  set.figures.emplace_back("train_loss", "Training loss");
  set.figures.emplace_back("attention_map_0_layer1", "map");
  set.notes["val_loss"] = "no validation records among the inputs";
  set.notes["probes"] = "no probe records in the metrics.jsonl of run";
  set.notes["longctx"] = "no long-context evaluation among the inputs";
  const std::vector<ReportRun> runs = {r};
  const std::vector<SweepPage> sweeps;
  const std::vector<std::string> warnings = {"metrics.jsonl:3: the last line was cut short"};
  const std::string h = report_html({"My <report>", runs, set, sweeps, warnings});
  EXPECT_NE(h.find("<title>My &lt;report&gt;</title>"), std::string::npos);
  EXPECT_EQ(count(h, "<img src=\"figures/train_loss.png\""), 1u);
  // An attention map shows only beside an analysis; this run has none.
  EXPECT_EQ(count(h, "attention_map_0_layer1.png"), 0u);
  for (const char* note : {"no validation records among the inputs", "no probe records in the metrics.jsonl of run",
                           "no long-context evaluation among the inputs"})
    EXPECT_EQ(count(h, note), 1u) << note;
  EXPECT_NE(h.find("<h2>Probes during training</h2>\n<p class=\"note\">"), std::string::npos);
  EXPECT_NE(h.find("<li>metrics.jsonl:3: the last line was cut short</li>"), std::string::npos);
  EXPECT_EQ(h.find("http"), std::string::npos);  // offline
}

TEST(ReportHtml, ASweepsFiguresGoWhereItsSectionPlacedThem) {
  FigureSet set;
  set.figures.emplace_back("sweep0_val_bpb", "bpb");
  SweepPage page;
  page.html = "<h2>Sweep</h2>\n<table></table>\n@@FIGURE:sweep0_val_bpb@@\n<p>after</p>\n";
  const std::vector<ReportRun> runs;
  const std::vector<SweepPage> sweeps = {page};
  const std::vector<std::string> warnings;
  const std::string h = report_html({"t", runs, set, sweeps, warnings});
  const size_t table = h.find("<table></table>"), fig = h.find("figures/sweep0_val_bpb.png"), after = h.find("<p>after</p>");
  ASSERT_NE(fig, std::string::npos);
  EXPECT_LT(table, fig);
  EXPECT_LT(fig, after);
  EXPECT_EQ(h.find("@@FIGURE"), std::string::npos);
}

}  // namespace
}  // namespace gatedlm::analysis
