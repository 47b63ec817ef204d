// The --format and --gguf-arch help of gatedlm import and export name every model family
// and GGUF architecture (they iterate io/model_families.cpp's list), and --format
// qwen3_moe, the family the list added, works end to end: an MoE checkpoint exports to
// Qwen3-MoE and imports back, and a dense one is refused by key with nothing written.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli_runner.h"
#include "test_files.h"

namespace gatedlm::testing {
namespace {

using nlohmann::json;

const char* const kFamilies[] = {"paper", "qwen3", "qwen3_moe", "qwen3_next", "qwen3_5", "qwen3_5_moe"};
const char* const kGgufArchitectures[] = {"qwen3", "qwen3moe", "qwen35", "qwen35moe", "qwen3next"};

TEST(ModelFamilyHelpCli, FormatAndGgufArchHelpNameEveryFamily) {
  for (const char* command : {"import", "export"}) {
    const CliResult r = run_gatedlm({command, "--help"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    for (const char* family : kFamilies) EXPECT_TRUE(contains(r.output, family)) << command << ": " << family;
    EXPECT_TRUE(contains(r.output, "paper | qwen3 | qwen3_moe | qwen3_next | qwen3_5 | qwen3_5_moe")) << r.output;
  }
  const CliResult r = run_gatedlm({"export", "--help"});
  for (const char* arch : kGgufArchitectures) EXPECT_TRUE(contains(r.output, std::string("| ") + arch)) << arch;
}

json model(bool moe) {
  json j{{"vocab_size", 258}, {"d_model", 32}, {"n_layers", 2},    {"n_heads", 2},
         {"n_kv_heads", 1},   {"head_dim", 16}, {"ffn_hidden", 64}, {"max_seq_len", 32}};
  if (moe) j["moe"] = {{"n_experts", 4}, {"top_k", 2}, {"expert_hidden", 16}};
  return j;
}

TEST(ModelFamilyHelpCli, Qwen3MoeFormatExportsAndImportsAnMoeModelAndRefusesADenseOne) {
  TempDir dir("qwen3_moe_cli");
  for (const bool moe : {true, false}) {
    const std::string name = moe ? "moe" : "dense";
    write_file(dir / (name + ".json"), model(moe).dump());
    const CliResult init = run_gatedlm({"init", "--config", (dir / (name + ".json")).string(), "--out", (dir / name).string()});
    ASSERT_EQ(init.exit_code, 0) << init.output;
  }
  const fs::path hf = dir / "hf";
  const CliResult exported = run_gatedlm({"export", (dir / "moe").string(), "--format", "qwen3_moe", "--out", hf.string()});
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_EQ(json::parse(read_file(hf / "config.json")).at("model_type"), "qwen3_moe");
  const CliResult imported = run_gatedlm({"import", hf.string(), "--out", (dir / "back").string()});
  ASSERT_EQ(imported.exit_code, 0) << imported.output;
  EXPECT_TRUE(contains(imported.output, "format qwen3_moe")) << imported.output;  // auto picked the family
  const CliResult refused = run_gatedlm({"export", (dir / "dense").string(), "--format", "qwen3_moe", "--out",
                                         (dir / "no").string()});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_TRUE(contains(refused.output, "model config key \"moe\" is required")) << refused.output;
  EXPECT_FALSE(fs::exists(dir / "no" / "config.json"));
}

}  // namespace
}  // namespace gatedlm::testing
