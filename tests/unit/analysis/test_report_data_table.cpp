// analysis/report_parts.h's DataTable: the report's data files name their columns in a
// header row and figures read them by those names, checked.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "analysis/report_parts.h"

namespace gatedlm::analysis {
namespace {

TEST(ReportDataTable, WritesAHeaderRowThenOneLinePerRow) {
  DataTable t("train_0", {"step", "loss", "loss_ema"});
  t.add_row({1, 5.5, 5.5});
  t.add_row({2, NAN, 5.25});
  EXPECT_EQ(t.rows(), 2u);
  EXPECT_EQ(t.text(), "step loss loss_ema\n1 5.5 5.5\n2 NaN 5.25\n");  // NaN: gnuplot's missing value
}

TEST(ReportDataTable, PlotsReadColumnsByCheckedName) {
  DataTable t("layers_1", {"layer", "gate_mean", "variant"});
  EXPECT_EQ(t.file(), "'data/layers_1.dat'");
  EXPECT_EQ(t.plot({"layer", "gate_mean"}), "'data/layers_1.dat' using 'layer':'gate_mean'");
  EXPECT_EQ(t.col("gate_mean"), "column('gate_mean')");
  EXPECT_EQ(t.quoted("variant"), "'variant'");
  EXPECT_THROW(t.plot({"layer", "gate_score"}), std::logic_error);  // no such column
  EXPECT_THROW(t.col("top1"), std::logic_error);
}

TEST(ReportDataTable, RefusesARowOfTheWrongWidth) {
  DataTable t("x", {"a", "b"});
  EXPECT_THROW(t.add_row({1}), std::logic_error);
  EXPECT_THROW(t.add_cells({"1", "2", "3"}), std::logic_error);
  t.add_cells({"1", "name"});
  EXPECT_EQ(t.row(0)[1], "name");
}

TEST(ReportFigureSet, AppendKeepsOrderAndFindsByName) {
  FigureSet a, b;
  a.figures.emplace_back("one", "first");
  a.tables.emplace_back("t1", std::vector<std::string>{"x"});
  b.figures.emplace_back("two", "second");
  b.notes["probes"] = "none";
  a.append(std::move(b));
  ASSERT_EQ(a.figures.size(), 2u);
  EXPECT_EQ(a.figures[1].name, "two");
  EXPECT_EQ(a.find("two")->caption, "second");
  EXPECT_EQ(a.find("three"), nullptr);
  EXPECT_NE(a.table("t1"), nullptr);
  EXPECT_EQ(a.notes.at("probes"), "none");
}

}  // namespace
}  // namespace gatedlm::analysis
