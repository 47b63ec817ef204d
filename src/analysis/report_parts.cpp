#include "analysis/report_parts.h"

#include <cmath>
#include <cstdio>
#include <fstream>

#include "core/error.h"

namespace gatedlm::analysis {

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
