#pragma once
// Errors a user can act on: every message names the file, key or value at fault.
#include <sstream>
#include <stdexcept>
#include <string>

namespace gatedlm {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Concatenates its arguments with operator<< (libstdc++ 12 has no std::format).
template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

template <typename... Args>
[[noreturn]] void fail(const Args&... args) {
  throw Error(cat(args...));
}

}  // namespace gatedlm
