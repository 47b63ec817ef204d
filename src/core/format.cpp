#include "core/format.h"

#include <cstdio>

namespace gatedlm {

std::string thousands(int64_t n) {
  // Through uint64_t: -INT64_MIN does not fit an int64_t.
  const uint64_t magnitude = n < 0 ? 0 - static_cast<uint64_t>(n) : static_cast<uint64_t>(n);
  std::string digits = std::to_string(magnitude);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(static_cast<size_t>(i), ",");
  return (n < 0 ? "-" : "") + digits;
}

std::string fixed(double value, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, value);
  return buf;
}

std::string signed_fixed(double value, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%+.*f", digits, value);
  return buf;
}

std::string short_count(double value) {
  char buf[64];
  if (value >= 1e6)
    std::snprintf(buf, sizeof buf, "%.2fM", value / 1e6);
  else if (value >= 1e3)
    std::snprintf(buf, sizeof buf, "%.1fk", value / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.0f", value);
  return buf;
}

}  // namespace gatedlm
