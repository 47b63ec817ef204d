#pragma once
// The check every hardening test makes of a refusal through the binary: a user error
// (non-zero exit, no signal, never "internal error") whose message holds every needle.
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "test_files.h"

namespace gatedlm::testing {

inline CliResult expect_refused(const std::vector<std::string>& args, std::initializer_list<std::string> needles) {
  const CliResult r = run_gatedlm(args);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_LT(r.exit_code, 128) << "crashed: " << r.output;
  EXPECT_FALSE(contains(r.output, "internal error")) << r.output;
  for (const std::string& n : needles) EXPECT_TRUE(contains(r.output, n)) << "missing \"" << n << "\" in:\n" << r.output;
  return r;
}

}  // namespace gatedlm::testing
