#include "cli/command_line.h"

#include <CLI/CLI.hpp>

namespace gatedlm::cli {

std::string command_line_of(const CLI::App& sub, const std::string& name) {
  std::string line = "gatedlm " + name;
  for (const std::string& a : sub.remaining()) line += " " + a;
  for (const CLI::Option* option : sub.get_options()) {
    if (option->count() == 0 || option->get_name() == "--help") continue;
    line += " " + option->get_name();
    if (option->get_type_size() != 0 && option->get_expected_max() != 0)  // flags have no value
      for (const std::string& r : option->results()) line += " " + r;
  }
  return line;
}

}  // namespace gatedlm::cli
