#pragma once
// Numbers as the tables and messages print them (demo, sweep, report): one formatter, so
// that the same count or rate reads the same wherever it is shown.
#include <cstdint>
#include <string>

namespace gatedlm {

// 1234567 -> "1,234,567"; -9876 -> "-9,876".
std::string thousands(int64_t n);
// 3.14159, 2 -> "3.14" (printf "%.*f").
std::string fixed(double value, int digits);
// 0.0123, 3 -> "+0.012"; -0.5, 1 -> "-0.5" (always with a sign).
std::string signed_fixed(double value, int digits);
// A count or rate in three significant-ish digits: 1234567 -> "1.23M", 5216 -> "5.2k", 977 -> "977".
std::string short_count(double value);

}  // namespace gatedlm
