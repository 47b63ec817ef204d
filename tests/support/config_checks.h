#pragma once
// The check the unit tests of model configs make of a refused one.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "model/config.h"
#include "test_files.h"

namespace gatedlm::testing {

// Expects model::config_from_json(base with `patch` merged in as a JSON merge patch,
// "cfg.json") to throw a gatedlm::Error whose message contains `needle` and names cfg.json.
inline void expect_config_rejected(nlohmann::json base, const nlohmann::json& patch, const std::string& needle) {
  base.merge_patch(patch);
  const std::string message = error_of([&] { model::config_from_json(base, "cfg.json"); });
  EXPECT_TRUE(contains(message, needle)) << patch.dump() << ": " << message;
  EXPECT_TRUE(contains(message, "cfg.json")) << message;
}

}  // namespace gatedlm::testing
