#include "analysis/html_text.h"

#include <cmath>
#include <cstdio>

namespace gatedlm::analysis {

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

std::string fmt(std::optional<double> v, const char* format) {
  if (!v || !std::isfinite(*v)) return kDash;
  char buf[64];
  std::snprintf(buf, sizeof buf, format, *v);
  return buf;
}

}  // namespace gatedlm::analysis
