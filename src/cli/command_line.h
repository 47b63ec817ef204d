#pragma once
// The command line a subcommand was given, rebuilt from its parsed options (for the record
// in results files): "gatedlm NAME --opt value ...".
#include <string>

namespace CLI {
class App;
}

namespace gatedlm::cli {

std::string command_line_of(const CLI::App& sub, const std::string& name);

}  // namespace gatedlm::cli
