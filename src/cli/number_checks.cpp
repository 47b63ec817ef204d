#include "cli/number_checks.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>

namespace gatedlm::cli {
namespace {

bool is_decimal_integer(const std::string& s) {
  size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  if (i == s.size()) return false;
  for (; i < s.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  return true;
}

std::string check_integer(const std::string& s, bool is_unsigned) {
  if (is_unsigned && s.find('-') != std::string::npos) return "must not be negative, got " + s;
  if (!is_decimal_integer(s)) return "";  // CLI11 reports what it cannot convert itself
  const char* begin = s.data() + (s[0] == '+' ? 1 : 0);
  if (is_unsigned) {
    uint64_t v;
    if (std::from_chars(begin, s.data() + s.size(), v).ec == std::errc::result_out_of_range)
      return s + " is out of range (at most " + std::to_string(UINT64_MAX) + ")";
  } else {
    int64_t v;
    if (std::from_chars(begin, s.data() + s.size(), v).ec == std::errc::result_out_of_range)
      return s + " is out of range (" + std::to_string(INT64_MIN) + " to " + std::to_string(INT64_MAX) + ")";
  }
  return "";
}

std::string check_float(const std::string& s) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str()) return "";  // not a number at all: CLI11 says so
  if (!std::isfinite(v)) return s + " is not a finite number";
  return "";
}

void add_checks(CLI::App& app) {
  for (CLI::Option* o : app.get_options()) {
    std::string type = o->get_type_name();
    type = type.substr(0, type.find(':'));
    if (type == "INT" || type == "UINT") {
      const bool is_unsigned = type == "UINT";
      o->check(CLI::Validator([is_unsigned](std::string& s) { return check_integer(s, is_unsigned); }, ""));
    } else if (type == "FLOAT") {
      o->check(CLI::Validator([](std::string& s) { return check_float(s); }, ""));
    }
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) add_checks(*sub);
}

}  // namespace

void add_strict_number_checks(CLI::App& app) { add_checks(app); }

CLI::Validator at_least(int64_t min) {
  return CLI::Validator(
      [min](std::string& s) -> std::string {
        int64_t v = 0;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc() || end != s.data() + s.size()) return "";  // conversion reports it
        if (v < min) return "must be at least " + std::to_string(min) + ", got " + s;
        return "";
      },
      "");
}

}  // namespace gatedlm::cli
