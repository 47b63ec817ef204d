#include "analysis/report_parts.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <stdexcept>

#include "core/error.h"

namespace gatedlm::analysis {

DataTable::DataTable(std::string name, std::vector<std::string> columns)
    : name_(std::move(name)), columns_(std::move(columns)) {}

void DataTable::add_row(const std::vector<double>& values) {
  std::vector<std::string> cells;
  for (double v : values) cells.push_back(num(v));
  add_cells(std::move(cells));
}

void DataTable::add_cells(std::vector<std::string> cells) {
  if (cells.size() != columns_.size())
    throw std::logic_error(cat("data table ", name_, ": a row of ", cells.size(), " cells for ", columns_.size(),
                               " columns"));
  rows_.push_back(std::move(cells));
}

std::string DataTable::text() const {
  std::string out;
  auto line = [&out](const std::vector<std::string>& cells) {
    for (size_t i = 0; i < cells.size(); ++i) out += (i ? " " : "") + cells[i];
    out += '\n';
  };
  line(columns_);
  for (const auto& r : rows_) line(r);
  return out;
}

std::string DataTable::file() const { return "'data/" + name_ + ".dat'"; }

void DataTable::check(std::string_view column) const {
  for (const std::string& c : columns_)
    if (c == column) return;
  throw std::logic_error(cat("data table ", name_, " has no column '", column, "'"));
}

std::string DataTable::plot(std::initializer_list<std::string_view> columns) const {
  std::string out = file() + " using ";
  bool first = true;
  for (std::string_view c : columns) {
    out += (first ? "" : ":") + quoted(c);
    first = false;
  }
  return out;
}

std::string DataTable::col(std::string_view column) const { return "column(" + quoted(column) + ")"; }

std::string DataTable::quoted(std::string_view column) const {
  check(column);
  return "'" + std::string(column) + "'";
}

void FigureSet::append(FigureSet other) {
  for (Figure& f : other.figures) figures.push_back(std::move(f));
  for (DataTable& t : other.tables) tables.push_back(std::move(t));
  for (auto& [name, m] : other.matrices) matrices[name] = std::move(m);
  for (auto& [key, note] : other.notes) notes[key] = std::move(note);
}

const Figure* FigureSet::find(const std::string& name) const {
  for (const Figure& f : figures)
    if (f.name == name) return &f;
  return nullptr;
}

const DataTable* FigureSet::table(const std::string& name) const {
  for (const DataTable& t : tables)
    if (t.name() == name) return &t;
  return nullptr;
}

void write_figure_data(const FigureSet& set, const std::filesystem::path& datadir) {
  for (const DataTable& t : set.tables) write_data(datadir / (t.name() + ".dat"), t.text());
  for (const auto& [name, m] : set.matrices) write_data(datadir / (name + ".dat"), m);
}

void write_data(const std::filesystem::path& path, const std::string& content) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << content;
  if (!f) fail(path.string(), ": cannot write");
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string gp_str(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "''";
    else if (c == '\n' || c == '\r') out += ' ';
    else out += c;
  }
  return out + "'";
}

std::string fmt(std::optional<double> v, const char* format) {
  if (!v || !std::isfinite(*v)) return kDash;
  char buf[64];
  std::snprintf(buf, sizeof buf, format, *v);
  return buf;
}

std::string num(double v) {
  if (!std::isfinite(v)) return "NaN";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

double jnum(const nlohmann::json& j) { return j.is_number() ? j.get<double>() : NAN; }

}  // namespace gatedlm::analysis
