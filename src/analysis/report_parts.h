#pragma once
// Pieces the report's pages share (report.cpp: runs and analyses; report_sweep.cpp: sweep
// tables): a figure as gnuplot elements, number and text formatting for HTML and gnuplot.
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
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

void write_data(const std::filesystem::path& path, const std::string& content);
std::string html_escape(const std::string& s);
std::string gp_str(const std::string& s);  // a gnuplot single-quoted string
std::string fmt(std::optional<double> v, const char* format);  // kDash when absent or not finite
std::string num(double v);  // %.9g, "NaN" when not finite (gnuplot's missing value)
double jnum(const nlohmann::json& j);  // NaN unless a number

}  // namespace gatedlm::analysis
