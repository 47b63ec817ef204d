// import and export carry a model's chat template across, byte for byte (issue 40): a
// Hugging Face directory's (tokenizer_config.json's chat_template, or chat_template.jinja,
// which comes first) becomes the checkpoint's chat_template.jinja; export writes it as
// chat_template.jinja beside a Hugging Face model and as tokenizer.chat_template in a GGUF
// file, which import turns back into chat_template.jinja. A template that does not parse is
// refused naming its file and line, with nothing written; a model without one gets none.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli_runner.h"
#include "expect_refused.h"
#include "test_files.h"

namespace gatedlm::testing {
namespace {

using nlohmann::json;

// What a byte-for-byte copy must keep: CRLF, a tab, trailing spaces, UTF-8, no final newline.
const std::string kTemplate =
    "{%- for m in messages %}<|im_start|>{{ m.role }}\r\n{{ m.content }}<|im_end|>\n{% endfor -%}\t"
    "{%- if add_generation_prompt %}<|im_start|>assistant  \n{% endif %}\xE2\x80\x94 \xC3\xA9";

// A byte model (no tokenizer.json needed for GGUF) as a checkpoint `ck` and as a Hugging
// Face directory `hf` without a template.
class ChatTemplateCarryCli : public ::testing::Test {
 protected:
  ChatTemplateCarryCli() : dir_("chat_carry_cli") {
    const json config{{"vocab_size", 258}, {"d_model", 16}, {"n_layers", 1},    {"n_heads", 2},
                      {"n_kv_heads", 1},   {"head_dim", 8},  {"ffn_hidden", 32}, {"max_seq_len", 32}};
    write_file(dir_ / "config.json", config.dump());
    run_ok({"init", "--config", (dir_ / "config.json").string(), "--out", (dir_ / "ck").string()});
    run_ok({"export", (dir_ / "ck").string(), "--format", "qwen3", "--out", (dir_ / "hf").string()});
  }
  std::string run_ok(const std::vector<std::string>& args) {
    const CliResult r = run_gatedlm(args);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r.output;
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  TempDir dir_;
};

TEST_F(ChatTemplateCarryCli, HuggingFaceDirectoryToCheckpointToHuggingFaceExport) {
  EXPECT_FALSE(fs::exists(dir_ / "hf" / "chat_template.jinja"));  // the checkpoint had none
  write_file(dir_ / "hf" / "tokenizer_config.json", json{{"eos_token", "<|im_end|>"}, {"chat_template", kTemplate}}.dump());
  const std::string out = run_ok({"import", path("hf"), "--out", path("ck2")});
  EXPECT_TRUE(contains(out, "chat template")) << out;
  EXPECT_TRUE(contains(out, "tokenizer_config.json")) << out;
  EXPECT_EQ(read_file(dir_ / "ck2" / "chat_template.jinja"), kTemplate);
  run_ok({"export", path("ck2"), "--format", "qwen3", "--out", path("hf2")});
  EXPECT_EQ(read_file(dir_ / "hf2" / "chat_template.jinja"), kTemplate);
  // chat_template.jinja comes before tokenizer_config.json's, as transformers takes it.
  write_file(dir_ / "hf" / "chat_template.jinja", "{{ messages[0].content }}\n");
  run_ok({"import", path("hf"), "--out", path("ck3")});
  EXPECT_EQ(read_file(dir_ / "ck3" / "chat_template.jinja"), "{{ messages[0].content }}\n");
}

TEST_F(ChatTemplateCarryCli, GgufExportThenImport) {
  write_file(dir_ / "ck" / "chat_template.jinja", kTemplate);
  const std::string exported = run_ok({"export", path("ck"), "--format", "gguf", "--out", path("gguf")});
  EXPECT_TRUE(contains(exported, "chat template")) << exported;
  const std::string file = read_file(dir_ / "gguf" / "model.gguf");
  EXPECT_TRUE(contains(file, "tokenizer.chat_template"));  // llama.cpp's key, with the text after it
  EXPECT_TRUE(contains(file, kTemplate));
  const std::string imported = run_ok({"import", path("gguf/model.gguf"), "--out", path("back")});
  EXPECT_TRUE(contains(imported, "tokenizer.chat_template")) << imported;
  EXPECT_EQ(read_file(dir_ / "back" / "chat_template.jinja"), kTemplate);
  // Without a template, none is written either way.
  fs::remove(dir_ / "ck" / "chat_template.jinja");
  run_ok({"export", path("ck"), "--format", "gguf", "--out", path("gguf_plain")});
  EXPECT_FALSE(contains(read_file(dir_ / "gguf_plain" / "model.gguf"), "tokenizer.chat_template"));
  run_ok({"import", path("gguf_plain/model.gguf"), "--out", path("back_plain")});
  EXPECT_FALSE(fs::exists(dir_ / "back_plain" / "chat_template.jinja"));
}

TEST_F(ChatTemplateCarryCli, BadTemplateIsRefusedWithNothingWritten) {
  write_file(dir_ / "hf" / "chat_template.jinja", "{{ messages }}\n{% if %}\n");
  expect_refused({"import", path("hf"), "--out", path("out")}, {"chat_template.jinja", "line 2"});
  EXPECT_FALSE(fs::exists(dir_ / "out"));
  write_file(dir_ / "ck" / "chat_template.jinja", "{% for m in messages %}");
  expect_refused({"export", path("ck"), "--format", "gguf", "--out", path("out")}, {"chat_template.jinja", "line 1"});
  EXPECT_FALSE(fs::exists(dir_ / "out"));
  expect_refused({"export", path("ck"), "--format", "qwen3", "--out", path("out")}, {"chat_template.jinja"});
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

}  // namespace
}  // namespace gatedlm::testing
