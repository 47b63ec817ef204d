// gatedlm quantize through the binary: the checkpoint it writes (formats recorded per
// tensor, GGUF's block bytes), what it refuses and leaves unwritten, training refusing the
// result, and every inference command accepting it (generate, serve, score, eval,
// analyze, stream-eval, bench generate) with results close to the F32 checkpoint's.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>

#include "cli_checkpoint.h"
#include "cli_runner.h"
#include "test_files.h"
#include "test_fixtures.h"
#include "tiny_training_data.h"

namespace gatedlm::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// d_model 64, ffn_hidden 96: every matrix quantises (widths 64 and 96); head_dim 16.
constexpr const char* kConfig =
    R"({"vocab_size": 258, "d_model": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "head_dim": 16,
        "ffn_hidden": 96, "max_seq_len": 64, "init_std": 0.1, "tie_embeddings": true, "gate": {"position": "sdpa"}})";

// The JSON header of a safetensors file.
json safetensors_header(const fs::path& file) { return json::parse(safetensors_header_text(file)); }

class QuantizeCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("gatedlm_quantize_cli_" + std::to_string(::getpid())));
    fs::remove_all(*dir_);
    fs::create_directories(*dir_);
    write_file(*dir_ / "model.json", kConfig);
    write_file(*dir_ / "text.txt", corpus_text(60, 3));
    const CliResult r = run_gatedlm({"init", "--config", (*dir_ / "model.json").string(), "--out", f32().string()});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    for (const char* type : {"bf16", "q8_0", "q4_0"}) {
      const CliResult q = run_gatedlm({"quantize", f32().string(), "--type", type, "--out", quantised(type).string()});
      ASSERT_EQ(q.exit_code, 0) << q.output;
    }
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
    dir_ = nullptr;
  }
  static fs::path f32() { return *dir_ / "f32"; }
  static fs::path quantised(const std::string& type) { return *dir_ / ("ck_" + type); }
  static fs::path path(const std::string& name) { return *dir_ / name; }
  // `gatedlm init` of a model of this config into the suite's directory, as `name`.
  static fs::path init_model(const std::string& name, const char* config) {
    write_file(path(name + ".json"), config);
    const CliResult r = run_gatedlm({"init", "--config", path(name + ".json").string(), "--out", path(name).string()});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return path(name);
  }

  // score --json of a checkpoint on the ids of the text's first 40 bytes (BOS first).
  static double mean_loss(const fs::path& ck) {
    std::string ids = "256";
    const std::string text = corpus_text(60, 3).substr(0, 40);
    for (unsigned char ch : text) ids += " " + std::to_string(ch);
    write_file(path("ids.txt"), ids + "\n");
    const CliResult r = run_gatedlm({"score", "--checkpoint", ck.string(), "--token-ids", path("ids.txt").string(), "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r.exit_code == 0 ? last_json_line(r.output)["mean_loss"].get<double>() : NAN;
  }

 private:
  static fs::path* dir_;  // the suite's files, shared by its tests
};
fs::path* QuantizeCliTest::dir_ = nullptr;

TEST_F(QuantizeCliTest, WritesFormatsPerTensor) {
  const int64_t rows_q = 4 * 16, d = 64;  // q_proj [64, 64]
  struct Want {
    const char* type;
    const char* dtype;
    json q_proj_shape;
  };
  for (const Want& w : {Want{"bf16", "BF16", {rows_q, d}}, Want{"q8_0", "U8", {rows_q, d / 32 * 34}},
                        Want{"q4_0", "U8", {rows_q, d / 32 * 18}}}) {
    SCOPED_TRACE(w.type);
    const json h = safetensors_header(quantised(w.type) / "model.safetensors");
    EXPECT_EQ(h["__metadata__"]["gatedlm.quantized"], w.type);
    const json formats = json::parse(h["__metadata__"]["gatedlm.tensor_formats"].get<std::string>());
    EXPECT_EQ(formats["model.layers.0.self_attn.q_proj.weight"], w.type);
    // The tied embedding is also the output matrix: Q8_0 in a Q4_0 checkpoint (as in a Q4_0 GGUF).
    EXPECT_EQ(formats["model.embed_tokens.weight"].get<std::string>(), std::string(w.type) == "q4_0" ? "q8_0" : w.type);
    EXPECT_FALSE(formats.contains("model.layers.0.input_layernorm.weight"));
    EXPECT_EQ(h["model.layers.0.self_attn.q_proj.weight"]["dtype"], w.dtype);
    EXPECT_EQ(h["model.layers.0.self_attn.q_proj.weight"]["shape"], w.q_proj_shape);
    EXPECT_EQ(h["model.layers.0.input_layernorm.weight"]["dtype"], "F32");
    EXPECT_TRUE(fs::exists(quantised(w.type) / "config.json"));
  }
  EXPECT_LT(fs::file_size(quantised("q4_0") / "model.safetensors"),
            fs::file_size(quantised("q8_0") / "model.safetensors"));
  EXPECT_LT(fs::file_size(quantised("q8_0") / "model.safetensors"), fs::file_size(f32() / "model.safetensors") / 3);
}

TEST_F(QuantizeCliTest, ScoreCloseToF32AndOrderedByPrecision) {
  const double f = mean_loss(f32()), b = mean_loss(quantised("bf16")), q8 = mean_loss(quantised("q8_0")),
               q4 = mean_loss(quantised("q4_0"));
  EXPECT_NEAR(b, f, 0.01 * f);
  EXPECT_NEAR(q8, f, 0.01 * f);
  EXPECT_NEAR(q4, f, 0.05 * f);
  EXPECT_NE(q4, f);  // the weights did change
}

// The K-quants and IQ4_XS on a model whose rows are 256 wide except the FFN's down
// projection (320): that one takes llama.cpp's fallback type; every command runs the result,
// close to the F32 model and no closer than its precision allows.
TEST_F(QuantizeCliTest, KQuantsTakeLlamaCppsFallbackOnNarrowRows) {
  init_model("wide",
             R"({"vocab_size": 258, "d_model": 256, "n_layers": 1, "n_heads": 4, "n_kv_heads": 2, "head_dim": 64,
                 "ffn_hidden": 320, "max_seq_len": 64, "init_std": 0.05, "tie_embeddings": true})");
  CliResult r;
  const double f = mean_loss(path("wide"));
  struct Want {
    const char* type;
    const char* narrow;
    double within;
  };
  for (const Want& w : {Want{"q6_k", "q8_0", 0.01}, Want{"q4_k", "q5_0", 0.05}, Want{"iq4_xs", "iq4_nl", 0.05},
                        Want{"q2_k", "q4_0", 0.3}}) {
    SCOPED_TRACE(w.type);
    const fs::path out = path(std::string("wide_") + w.type);
    r = run_gatedlm({"quantize", path("wide").string(), "--type", w.type, "--out", out.string()});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const json h = safetensors_header(out / "model.safetensors");
    const json formats = json::parse(h["__metadata__"]["gatedlm.tensor_formats"].get<std::string>());
    EXPECT_EQ(formats["model.layers.0.self_attn.q_proj.weight"], w.type);
    EXPECT_EQ(formats["model.embed_tokens.weight"], w.type);
    EXPECT_EQ(formats["model.layers.0.mlp.down_proj.weight"], w.narrow);
    const double q = mean_loss(out);
    EXPECT_NEAR(q, f, w.within * f);
    EXPECT_NE(q, f);
  }
}

// quantize --type q4_k_m writes llama.cpp's mix: the output matrix and the attn_v / ffn_down
// of the layers use_more_bits picks in Q6_K, the rest Q4_K; the checkpoint holds exactly the
// blocks of the GGUF file export writes for the same mix (they score the same, bit for bit).
TEST_F(QuantizeCliTest, MixesChooseLlamaCppsTypePerTensor) {
  init_model("mix",
             R"({"vocab_size": 258, "d_model": 256, "n_layers": 8, "n_heads": 4, "n_kv_heads": 2, "head_dim": 64,
                 "ffn_hidden": 512, "max_seq_len": 64, "init_std": 0.05, "tie_embeddings": true})");
  CliResult r;
  const fs::path out = path("mix_q4_k_m"), file = path("mix_gguf");
  r = run_gatedlm({"quantize", path("mix").string(), "--type", "q4_k_m", "--out", out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json meta = safetensors_header(out / "model.safetensors")["__metadata__"];
  EXPECT_EQ(meta["gatedlm.quantized"], "q4_k_m");
  const json formats = json::parse(meta["gatedlm.tensor_formats"].get<std::string>());
  EXPECT_EQ(formats["model.embed_tokens.weight"], "q6_k") << "tied: the output matrix's rule";
  for (int l = 0; l < 8; ++l) {
    const bool more = l == 0 || l == 3 || l == 6 || l == 7;  // use_more_bits(l, 8)
    const std::string layer = "model.layers." + std::to_string(l);
    EXPECT_EQ(formats[layer + ".self_attn.v_proj.weight"], more ? "q6_k" : "q4_k") << l;
    EXPECT_EQ(formats[layer + ".mlp.down_proj.weight"], more ? "q6_k" : "q4_k") << l;
    EXPECT_EQ(formats[layer + ".self_attn.q_proj.weight"], "q4_k") << l;
  }
  r = run_gatedlm({"export", path("mix").string(), "--format", "gguf", "--dtype", "q4_k_m", "--out", file.string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(mean_loss(out), mean_loss(file / "model.gguf"));
  EXPECT_NE(mean_loss(out), mean_loss(path("mix")));
}

// The K-quant tiles' far request at batch 1 (GATEDLM_FAR_REQUEST, on by default on Intel CPUs
// only) is a prefetch: greedy decoding of a Q4_K checkpoint whose ffn_down tiles are long
// enough to take it (2048 columns: 8 super-blocks of 2304 bytes a tile column, over the 16 KiB
// threshold) gives the same tokens with it and without it, and a bad value is refused by name
// when the weights are loaded, before any product runs.
TEST_F(QuantizeCliTest, TheFarTileRequestChangesNoOutput) {
  init_model("far",
             R"({"vocab_size": 258, "d_model": 256, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "head_dim": 64,
                 "ffn_hidden": 2048, "max_seq_len": 64, "init_std": 0.05, "tie_embeddings": true})");
  CliResult r;
  r = run_gatedlm({"quantize", path("far").string(), "--type", "q4_k", "--out", path("far_q4_k").string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto generate_with = [&](const char* far) {
    ::setenv("GATEDLM_FAR_REQUEST", far, 1);
    const CliResult g = run_gatedlm({"generate", "--checkpoint", path("far_q4_k").string(), "--tokenizer", "byte",
                                     "--prompt", "the state", "--max-tokens", "12", "--temperature", "0", "--json"});
    ::unsetenv("GATEDLM_FAR_REQUEST");
    return g;
  };
  const CliResult with = generate_with("1"), without = generate_with("0");
  ASSERT_EQ(with.exit_code, 0) << with.output;
  ASSERT_EQ(without.exit_code, 0) << without.output;
  const json a = last_json_line(with.output), b = last_json_line(without.output);
  EXPECT_EQ(a["ids"], b["ids"]);
  EXPECT_EQ(a["ids"].size(), 12u);
  const CliResult bad = generate_with("sometimes");
  EXPECT_NE(bad.exit_code, 0) << bad.output;
  EXPECT_TRUE(contains(bad.output, "error: GATEDLM_FAR_REQUEST=sometimes: expected 0")) << bad.output;
}

TEST_F(QuantizeCliTest, RefusesBadInputAndWritesNothing) {
  CliResult r = run_gatedlm({"quantize", f32().string(), "--type", "iq2_xxs", "--out", path("bad_type").string()});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "--type iq2_xxs")) << r.output;
  EXPECT_FALSE(fs::exists(path("bad_type")));
  r = run_gatedlm({"quantize", quantised("q8_0").string(), "--type", "q4_0", "--out", path("twice").string()});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "already quantised")) << r.output;
  EXPECT_FALSE(fs::exists(path("twice")));
  r = run_gatedlm({"quantize", f32().string(), "--type", "q8_0", "--out", quantised("q4_0").string()});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "not an empty directory")) << r.output;
  EXPECT_EQ(safetensors_header(quantised("q4_0") / "model.safetensors")["__metadata__"]["gatedlm.quantized"], "q4_0");
}

TEST_F(QuantizeCliTest, TrainingRefusesQuantisedCheckpoint) {
  fs::create_directories(path("train"));
  ASSERT_EQ(make_tiny_training_data(path("train")).exit_code, 0);
  const CliResult r = run_gatedlm({"train", "--init-from", quantised("q8_0").string(), "--data",
                                   (path("train") / "data").string(), "--out", path("run").string(), "--steps", "2"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, (quantised("q8_0") / "model.safetensors").string())) << r.output;
  EXPECT_TRUE(contains(r.output, "inference checkpoint with q8_0 weights")) << r.output;
  EXPECT_FALSE(fs::exists(path("run") / "checkpoints"));
}

TEST_F(QuantizeCliTest, InferenceCommandsAcceptIt) {
  const std::string ck = quantised("q4_0").string(), text = path("text.txt").string();
  CliResult r = run_gatedlm({"generate", "--checkpoint", ck, "--tokenizer", "byte", "--prompt", "the state",
                             "--max-tokens", "8", "--seed", "1", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = run_gatedlm({"eval", "--checkpoint", ck, "--text", text, "--tokenizer", "byte", "--seq-len", "32", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::isfinite(last_json_line(r.output)["loss"].get<double>()));
  r = run_gatedlm({"analyze", "--checkpoint", ck, "--text", text, "--tokenizer", "byte", "--sequences", "2",
                   "--seq-len", "32", "--quiet", "--out", path("analysis.json").string()});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(path("analysis.json")));
  r = run_gatedlm({"stream-eval", "--checkpoint", ck, "--tokenizer", "byte", "--text", text, "--window", "16",
                   "--sinks", "0,4", "--tokens", "48", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = run_gatedlm({"bench", "generate", "--checkpoint", ck, "--batch", "1,8", "--prompt-tokens", "8",
                   "--new-tokens", "4", "--reps", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(last_json_line(r.output)["weights"], "q4_0");
  r = run_gatedlm({"bench", "generate", "--config", path("model.json").string(), "--weights", "q8_0", "--batch", "1",
                   "--prompt-tokens", "8", "--new-tokens", "4", "--reps", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(last_json_line(r.output)["weights"], "q8_0");
  EXPECT_GT(last_json_line(r.output)["quantized_weight_bytes"].get<int64_t>(), 0);
}

// One HTTP request to 127.0.0.1:port; the whole response (the server closes or answers
// with Content-Length; reading until the status line and body arrived is enough here).
std::string http_post(int port, const std::string& target, const std::string& body) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return "";
  }
  const std::string request = "POST " + target + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n" +
                              "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                              "\r\n\r\n" + body;
  ::send(fd, request.data(), request.size(), 0);
  std::string response;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) response.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return response;
}

TEST_F(QuantizeCliTest, ServeAnswersFromQuantisedCheckpoint) {
  const fs::path log = path("serve.log");
  const pid_t pid = spawn_gatedlm(
      {"serve", "--checkpoint", quantised("q8_0").string(), "--tokenizer", "byte", "--port", "0"}, log.string());
  int port = 0;
  const std::regex listening(R"(listening on http://127\.0\.0\.1:(\d+))");
  for (int i = 0; i < 600 && port == 0; ++i) {  // the log line, within a minute
    std::smatch m;
    const std::string text = read_file(log);
    if (std::regex_search(text, m, listening)) port = std::stoi(m[1]);
    else std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_GT(port, 0) << read_file(log);
  const std::string response =
      http_post(port, "/v1/completions", R"({"prompt": "the state", "max_tokens": 6, "seed": 3})");
  ::kill(pid, SIGTERM);
  EXPECT_EQ(wait_exit_code(pid), 0) << read_file(log);
  EXPECT_TRUE(contains(response, "HTTP/1.1 200")) << response;
  EXPECT_TRUE(contains(response, "\"text\"")) << response;
}

}  // namespace
}  // namespace gatedlm::testing
