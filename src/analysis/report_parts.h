#pragma once
// Pieces the report's pages share (report.cpp: runs and analyses; report_sweep.cpp: sweep
// tables): a figure as gnuplot elements, the data tables it plots (columns read by name),
// number and text formatting for HTML and gnuplot.
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gatedlm::analysis {

inline constexpr const char* kDash = "—";

// One figure: rendered as figures/NAME.png and .svg by the report's gnuplot script.
struct Figure {
  Figure(std::string n, std::string c) : name(std::move(n)), caption(std::move(c)) {}
  std::string name, caption;
  int width = 760, height = 520;
  std::string setup;                  // gnuplot commands before `plot`
  std::vector<std::string> elements;  // plot elements
};

// A data file DIR/data/NAME.dat whose first row names its columns, so that a figure reads
// them by name (gnuplot: `using 'step':'loss'`), never by position:
//   step loss loss_ema
//   1 5.6 5.6
// Cells are separated by one space; numbers are written by num() (NaN: gnuplot's missing).
class DataTable {
 public:
  DataTable(std::string name, std::vector<std::string> columns);
  const std::string& name() const { return name_; }
  const std::vector<std::string>& columns() const { return columns_; }
  size_t rows() const { return rows_.size(); }
  const std::vector<std::string>& row(size_t i) const { return rows_.at(i); }
  void add_row(const std::vector<double>& values);     // one value per column
  void add_cells(std::vector<std::string> cells);      // formatted cells (a label column); no spaces
  std::string text() const;                            // the header row, then the rows
  std::string file() const;                            // 'data/NAME.dat', quoted for gnuplot
  // "'data/NAME.dat' using 'a':'b'". Every name is checked (std::logic_error when the table
  // has no such column: a typo in the report, not in the user's input).
  std::string plot(std::initializer_list<std::string_view> columns) const;
  // "column('a')", checked, for a using expression such as ($4 > 0 ? $2 : 1/0).
  std::string col(std::string_view column) const;
  // "'a'", checked, for xtic(stringcolumn('a')) and the like.
  std::string quoted(std::string_view column) const;

 private:
  void check(std::string_view column) const;
  std::string name_;
  std::vector<std::string> columns_;
  std::vector<std::vector<std::string>> rows_;
};

// What the figure builders hand the report: figures, the data files they read, and why a
// section has no figure.
struct FigureSet {
  std::vector<Figure> figures;
  std::vector<DataTable> tables;              // written as data/NAME.dat
  std::map<std::string, std::string> matrices;  // NAME -> a headerless matrix (gnuplot `matrix with image`)
  std::map<std::string, std::string> notes;     // a section's key -> why it has no figure
  void append(FigureSet other);
  const Figure* find(const std::string& name) const;
  const DataTable* table(const std::string& name) const;
};

void write_data(const std::filesystem::path& path, const std::string& content);
// Writes every table and matrix of `set` into datadir.
void write_figure_data(const FigureSet& set, const std::filesystem::path& datadir);
std::string html_escape(const std::string& s);
std::string gp_str(const std::string& s);  // a gnuplot single-quoted string
std::string fmt(std::optional<double> v, const char* format);  // kDash when absent or not finite
std::string num(double v);  // %.9g, "NaN" when not finite (gnuplot's missing value)
double jnum(const nlohmann::json& j);  // NaN unless a number

}  // namespace gatedlm::analysis
