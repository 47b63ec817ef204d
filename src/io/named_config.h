#pragma once
// Named presets shipped in the source tree's configs/ (configs/demo/NAME.json,
// configs/sweep/NAME.json): found next to the binary (its build directory's parent and
// grandparent) or under the current directory.
#include <string>

namespace gatedlm::io {

// NAME itself when it is a file, else configs/SUBDIR/NAME.json in those places. Throws
// naming every place looked at; `command` starts the message ("demo", "sweep").
std::string find_named_config(const std::string& command, const std::string& subdir, const std::string& name);

}  // namespace gatedlm::io
