#pragma once
// What the tests that run the binary on a model share: a random checkpoint made by
// `gatedlm init`, and the JSON object a command prints on its last line.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli_runner.h"
#include "test_files.h"

namespace gatedlm::testing {

// dir/NAME: a random checkpoint of `config` (written beside it as dir/NAME.json), made by
// `gatedlm init`; the test fails unless init exits 0.
inline fs::path make_checkpoint(const TempDir& dir, const std::string& name, const nlohmann::json& config) {
  write_file(dir / (name + ".json"), config.dump());
  const CliResult r =
      run_gatedlm({"init", "--config", (dir / (name + ".json")).string(), "--out", (dir / name).string()});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return dir / name;
}

// The JSON object on the output's last line (the whole output when that is one line);
// throws nlohmann::json's parse error when it is not JSON.
inline nlohmann::json last_json_line(const std::string& output) {
  const size_t line = output.rfind("\n{");
  return nlohmann::json::parse(output.substr(line == std::string::npos ? 0 : line + 1));
}

}  // namespace gatedlm::testing
