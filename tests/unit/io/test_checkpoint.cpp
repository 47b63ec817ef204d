// Checkpoints: round trip, and refusal of truncated or mismatched files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "model/init.h"

namespace gatedlm::io {
namespace {

namespace fs = std::filesystem;

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gatedlm_ckpt_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    config_ = model::config_from_json({{"vocab_size", 50},
                                       {"d_model", 8},
                                       {"n_layers", 2},
                                       {"n_heads", 2},
                                       {"n_kv_heads", 1},
                                       {"head_dim", 4},
                                       {"ffn_hidden", 16},
                                       {"max_seq_len", 32},
                                       {"gate", {{"position", "sdpa"}}}});
    model::init_params(params_, model::ParamLayout(config_), config_, 5);
    save_checkpoint(dir_.string(), config_, params_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path weights() const { return dir_ / "model.safetensors"; }

  void expect_load_error(const std::string& needle) {
    try {
      load_checkpoint(dir_.string());
      ADD_FAILURE() << "loaded a damaged checkpoint";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }

  fs::path dir_;
  model::ModelConfig config_;
  std::vector<float> params_;
};

TEST_F(CheckpointTest, RoundTripIsExact) {
  Checkpoint ck = load_checkpoint(dir_.string());
  EXPECT_EQ(ck.params, params_);
  EXPECT_EQ(model::config_to_json(ck.config), model::config_to_json(config_));
  SafetensorsReader r(weights().string());
  EXPECT_EQ(r.entry("model.layers.1.self_attn.gate.weight").shape, (std::vector<int64_t>{8, 8}));
  EXPECT_EQ(r.entry("model.embed_tokens.weight").dtype, "F32");
}

TEST_F(CheckpointTest, RefusesTruncatedFile) {
  fs::resize_file(weights(), fs::file_size(weights()) - 10);
  expect_load_error("truncated");
}

TEST_F(CheckpointTest, RefusesMissingOrExtraOrMisshapenTensors) {
  std::vector<TensorRef> refs;
  const model::ParamLayout layout(config_);
  for (const auto& s : layout.specs())
    if (s.name != "model.norm.weight") refs.push_back({s.name, s.shape, params_.data() + s.offset});
  write_safetensors(weights().string(), refs);
  expect_load_error("missing tensor model.norm.weight");

  refs.push_back({"model.norm.weight", {8}, params_.data()});
  refs.push_back({"model.layers.0.self_attn.sink.weight", {2}, params_.data()});
  write_safetensors(weights().string(), refs);
  expect_load_error("unexpected tensor model.layers.0.self_attn.sink.weight");

  refs.pop_back();
  refs.back().shape = {4, 2};
  write_safetensors(weights().string(), refs);
  expect_load_error("model.norm.weight has shape [4, 2]");
}

TEST_F(CheckpointTest, RefusesConfigThatDoesNotMatchTheWeights) {
  nlohmann::json j = model::config_to_json(config_);
  j["gate"]["granularity"] = "headwise";
  std::ofstream(dir_ / "config.json") << j.dump();
  expect_load_error("self_attn.gate.weight has shape [8, 8], the config needs [2, 8]");
}

TEST_F(CheckpointTest, RefusesGarbageAndMissingFiles) {
  std::ofstream(weights(), std::ios::trunc) << "not a safetensors file at all";
  expect_load_error("model.safetensors");
  fs::remove(weights());
  expect_load_error("no model.safetensors");
  EXPECT_THROW(load_checkpoint((dir_ / "nope").string()), Error);
}

}  // namespace
}  // namespace gatedlm::io
