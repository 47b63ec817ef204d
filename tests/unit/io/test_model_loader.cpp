// The one loader (io/model_loader.h): every kind of path becomes the same model, bit for bit
// where the format stores F32 (a checkpoint, a run's latest, a Hugging Face directory, a
// GGUF file), with the blocks kept for a quantised checkpoint and the tokenizer the model
// carries; loads run in parallel and write no file; bad paths are refused by name.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <iterator>
#include <thread>
#include <vector>

#include "io/checkpoint.h"
#include "io/gguf.h"
#include "io/hf_convert.h"
#include "io/model_loader.h"
#include "io/quantized_checkpoint.h"
#include "io/safetensors.h"
#include "model/param_layout.h"
#include "cli_runner.h"
#include "small_tokenizer_json.h"
#include "test_files.h"
#include "test_util.h"

namespace gatedlm::io {
namespace {

using nlohmann::json;
using testing::contains;
using testing::error_of;
using testing::TempDir;
namespace fs = std::filesystem;

Checkpoint small_checkpoint(uint64_t seed) {
  const json config{{"vocab_size", 300}, {"d_model", 64}, {"n_layers", 2},     {"n_heads", 4},
                    {"n_kv_heads", 2},   {"head_dim", 16}, {"ffn_hidden", 96}, {"max_seq_len", 64}};
  Checkpoint ck{model::config_from_json(config, "test"), {}};
  ck.params = testing::random_vector<float>(model::ParamLayout(ck.config).total(), seed, 0.2);
  return ck;
}

ModelLoadOptions format(const std::string& name) {
  ModelLoadOptions o;
  o.format = name;
  return o;
}

bool same_bits(std::span<const float> a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), b.size() * sizeof(float)) == 0;
}

// The small tokenizer.json on disk beside `dir` (not inside it).
std::string tokenizer_file(const TempDir& dir) {
  const fs::path path = dir / "tokenizer.json";
  testing::write_file(path, testing::small_tokenizer().dump());
  return path.string();
}

TEST(ModelLoader, CheckpointAndRunDirectoryGiveTheSameBits) {
  TempDir dir("loader_ck");
  const Checkpoint ck = small_checkpoint(1);
  const fs::path step = dir / "run" / "checkpoints" / "step_00000002";
  save_checkpoint(step.string(), ck.config, ck.params);
  testing::write_file(dir / "run" / "latest", "step_00000002\n");

  const LoadedModel direct = load_model(step.string());
  EXPECT_EQ(direct.kind, ModelFileKind::checkpoint);
  EXPECT_TRUE(same_bits(direct.model->params(), ck.params));
  EXPECT_EQ(direct.quantized, nullptr);
  EXPECT_EQ(direct.weight_format(), "f32");
  EXPECT_EQ(direct.tokenizer, nullptr);  // none recorded, none required

  const LoadedModel run = load_model((dir / "run").string());
  EXPECT_EQ(run.kind, ModelFileKind::run_directory);
  EXPECT_EQ(run.checkpoint_dir, step.string());
  EXPECT_TRUE(same_bits(run.model->params(), ck.params));

  const std::string msg = error_of([&] { load_model(step.string(), ModelLoadOptions::reading_text("")); });
  EXPECT_TRUE(contains(msg, step.string()) && contains(msg, "no tokenizer recorded")) << msg;
}

TEST(ModelLoader, QuantizedCheckpointKeepsItsBlocks) {
  TempDir dir("loader_q8");
  const Checkpoint ck = small_checkpoint(2);
  save_quantized_checkpoint((dir / "q8").string(), ck.config, ck.params,
                            model::uniform_formats(model::ParamLayout(ck.config), kernels::ElementType::q8_0));
  const LoadedModel q = load_model((dir / "q8").string(), [] {
    ModelLoadOptions o;
    o.release_f32 = false;  // the values stay readable
    return o;
  }());
  EXPECT_EQ(q.kind, ModelFileKind::quantized_checkpoint);
  ASSERT_NE(q.quantized, nullptr);
  EXPECT_EQ(q.weight_format(), "q8_0");
  // The buffer holds the dequantised blocks: close to the F32 weights, not equal.
  double worst = 0;
  for (size_t i = 0; i < ck.params.size(); ++i)
    worst = std::max(worst, std::fabs(static_cast<double>(q.model->params()[i]) - ck.params[i]));
  EXPECT_GT(worst, 0.0);
  EXPECT_LT(worst, 0.01);
}

// Hardening, third round, row 6: a hybrid whose A_log overflows float32 once exponentiated
// (100: finite as stored) imported without complaint, and generate then sampled from NaN.
// save_checkpoint refuses it before writing anything, and a checkpoint written by another
// tool is refused by the loader every command uses, naming the path.
TEST(ModelLoader, RefusesAModelWhoseFirstStepIsNotFinite) {
  TempDir dir("loader_overflow");
  const json config{{"vocab_size", 260}, {"d_model", 64}, {"n_layers", 2}, {"n_heads", 4}, {"n_kv_heads", 2},
                    {"head_dim", 16}, {"ffn_hidden", 96}, {"max_seq_len", 64}, {"full_attention_interval", 2},
                    {"linear_attention", {{"n_k_heads", 2}, {"n_v_heads", 4}, {"k_head_dim", 16},
                                          {"v_head_dim", 16}, {"conv_kernel", 4}}}};
  Checkpoint ck{model::config_from_json(config, "test"), {}};
  const model::ParamLayout layout(ck.config);
  ck.params = testing::random_vector<float>(layout.total(), 5, 0.2);
  const fs::path good = dir / "good";
  save_checkpoint(good.string(), ck.config, ck.params);
  EXPECT_NO_THROW(load_model(good.string())) << "the same model with a usable A_log loads";

  ck.params[layout.at("model.layers.0.linear_attn.A_log").offset + 1] = 100.0f;
  const fs::path refused = dir / "refused";
  const std::string saved = error_of([&] { save_checkpoint(refused.string(), ck.config, ck.params); });
  EXPECT_TRUE(contains(saved, "model.layers.0.linear_attn.A_log") && contains(saved, "overflows")) << saved;
  EXPECT_FALSE(fs::exists(refused)) << "nothing written";

  const fs::path other = dir / "written_elsewhere";  // as another tool could write it
  fs::create_directories(other);
  testing::write_file(other / "config.json", model::config_to_json(ck.config).dump());
  std::vector<TensorRef> refs;
  for (const model::ParamSpec& s : layout.specs()) refs.push_back({s.name, s.shape, ck.params.data() + s.offset});
  write_safetensors((other / "model.safetensors").string(), refs);
  const std::string loaded = error_of([&] { load_model(other.string()); });
  EXPECT_TRUE(contains(loaded, other.string()) && contains(loaded, "non-finite logits")) << loaded;
}

TEST(ModelLoader, HuggingFaceDirectoryWithItsTokenizer) {
  TempDir dir("loader_hf");
  const Checkpoint ck = small_checkpoint(3);
  const fs::path hf = dir / "hf";
  export_hf(ck, HfFormat::qwen3, kernels::ElementType::f32, hf.string());
  testing::write_file(hf / "tokenizer.json", testing::small_tokenizer().dump());

  const LoadedModel m = load_model(hf.string());
  EXPECT_EQ(m.kind, ModelFileKind::hf_directory);
  EXPECT_TRUE(same_bits(m.model->params(), ck.params));
  ASSERT_NE(m.tokenizer, nullptr);
  EXPECT_EQ(m.tokenizer_source, (hf / "tokenizer.json").string());
  // Read as a named family, and as a gatedlm checkpoint it is not.
  EXPECT_TRUE(same_bits(load_model(hf.string(), format("qwen3")).model->params(), ck.params));
  const std::string msg = error_of([&] { load_model(hf.string(), format("gatedlm")); });
  EXPECT_TRUE(contains(msg, (hf / "config.json").string())) << msg;  // not gatedlm's config
}

TEST(ModelLoader, GgufFileWithItsVocabularyInMemory) {
  TempDir dir("loader_gguf");
  const Checkpoint ck = small_checkpoint(4);
  const std::string tokenizer = tokenizer_file(dir);
  export_gguf(ck, kernels::ElementType::f32, tokenizer, (dir / "m.gguf").string());
  export_gguf(ck, kernels::ElementType::f32, kByteVocabulary, (dir / "byte.gguf").string());

  const LoadedModel m = load_model((dir / "m.gguf").string());
  EXPECT_EQ(m.kind, ModelFileKind::gguf_file);
  EXPECT_TRUE(same_bits(m.model->params(), ck.params));
  ASSERT_NE(m.tokenizer, nullptr);
  const std::unique_ptr<Tokenizer> original = Tokenizer::load(tokenizer);
  for (const char* text : {"abcabc", "h<x>gab", "abab<|endoftext|>h"})
    EXPECT_EQ(m.tokenizer->encode(text), original->encode(text)) << text;

  const LoadedModel b = load_model((dir / "byte.gguf").string());
  ASSERT_NE(b.tokenizer, nullptr);
  EXPECT_EQ(b.tokenizer->name(), "byte");
  // --tokenizer replaces the file's own.
  const LoadedModel given = load_model((dir / "m.gguf").string(), ModelLoadOptions::reading_text("byte"));
  EXPECT_EQ(given.tokenizer->name(), "byte");
}

// Two threads load two GGUF files again and again with TMPDIR pointing at a directory where
// a symlink waits under the name the vocabulary's scratch file once had: every load
// succeeds, the link's target is untouched and nothing else appears there (the vocabulary
// never goes through a file, whose predictable name let loads collide and follow links).
TEST(ModelLoader, ParallelGgufLoadsWriteNoFile) {
  TempDir dir("loader_parallel");
  const std::string tokenizer = tokenizer_file(dir);
  const std::string a = (dir / "a.gguf").string(), b = (dir / "b.gguf").string();
  export_gguf(small_checkpoint(5), kernels::ElementType::f32, tokenizer, a);
  export_gguf(small_checkpoint(6), kernels::ElementType::f32, tokenizer, b);
  fs::create_directories(dir / "tmp");
  testing::write_file(dir / "victim.txt", "keep me");
  fs::create_symlink(dir / "victim.txt", dir / "tmp" / ("gatedlm-gguf-vocab-" + std::to_string(::getpid()) + ".json"));
  const std::string tmp_dir = (dir / "tmp").string();
  testing::ScopedEnv tmp("TMPDIR", tmp_dir.c_str());
  std::atomic<int> failures{0};
  auto loads = [&](const std::string& path) {
    for (int i = 0; i < 8; ++i) try {
        if (!load_model(path).tokenizer) ++failures;
      } catch (const Error&) {
        ++failures;
      }
  };
  std::thread t1(loads, a), t2(loads, b);
  t1.join();
  t2.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(testing::read_file(dir / "victim.txt"), "keep me");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir / "tmp"), fs::directory_iterator()), 1);
}

TEST(ModelLoader, RefusesPathsThatHoldNoModel) {
  TempDir dir("loader_bad");
  EXPECT_TRUE(contains(error_of([&] { load_model((dir / "missing").string()); }), "no such file or directory"));
  testing::write_file(dir / "broken.gguf", "GGVF and more");
  const std::string not_gguf = error_of([&] { load_model((dir / "broken.gguf").string()); });
  EXPECT_TRUE(contains(not_gguf, "broken.gguf") && contains(not_gguf, "not GGUF") && contains(not_gguf, "\"GGVF\""))
      << not_gguf;
  fs::create_symlink(dir / "loop", dir / "loop");
  const std::string loop = error_of([&] { load_model((dir / "loop").string()); });
  EXPECT_TRUE(contains(loop, "loop: cannot look at it")) << loop;
  fs::create_directories(dir / "empty");
  EXPECT_TRUE(contains(error_of([&] { load_model((dir / "empty").string()); }), "not a model"));
  EXPECT_TRUE(contains(error_of([&] { load_model((dir / "empty").string(), format("gguf")); }), "not a GGUF file"));
}

}  // namespace
}  // namespace gatedlm::io
