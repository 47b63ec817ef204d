#pragma once
// Strict numbers on the command line. CLI11 2.1 saturates an out-of-range integer
// (--steps 99999999999999999999 becomes INT64_MAX), wraps a negative unsigned one (--seed -1
// becomes 2^64-1) and takes "inf", "nan" and 1e400 as floating-point values; these checks
// refuse all of them, naming the option and the limit.
#include <cstdint>
#include <CLI/CLI.hpp>

namespace gatedlm::cli {

// Adds the strict checks to every integer and floating-point option of app and of its
// subcommands, recursively (call after every command is registered).
void add_strict_number_checks(CLI::App& app);

// "must be at least N" / "must be positive" with the value and the option named plainly
// (CLI::PositiveNumber prints "not in range 0.000000 to 1.797693e+308").
CLI::Validator at_least(int64_t min);

}  // namespace gatedlm::cli
