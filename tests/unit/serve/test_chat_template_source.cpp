// io::model_chat_template: where `serve` finds a model's chat template beside its tokenizer
// (chat_template.jinja first, then tokenizer_config.json's string or named list).
#include <gtest/gtest.h>

#include "io/chat_template_source.h"
#include "test_files.h"

namespace gatedlm::io {
namespace {

using testing::contains;
using testing::error_of;
using testing::TempDir;
using testing::write_file;

LoadedModel model_in(const TempDir& dir) {
  LoadedModel lm;
  lm.kind = ModelFileKind::checkpoint;
  lm.checkpoint_dir = dir.path().string();
  lm.tokenizer_source = "byte";
  return lm;
}

TEST(ChatTemplateSource, NoneWhenTheDirectoryHasNone) {
  TempDir dir("chat_src");
  EXPECT_FALSE(model_chat_template(model_in(dir)));
  write_file(dir / "tokenizer_config.json", R"({"eos_token": "x"})");
  EXPECT_FALSE(model_chat_template(model_in(dir)));
}

TEST(ChatTemplateSource, TokenizerConfigStringOrTheDefaultOfAList) {
  TempDir dir("chat_src");
  write_file(dir / "tokenizer_config.json", R"({"chat_template": "{{ messages }}"})");
  std::optional<ChatTemplateText> t = model_chat_template(model_in(dir));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->source, "{{ messages }}");
  EXPECT_TRUE(contains(t->origin, "tokenizer_config.json"));
  write_file(dir / "tokenizer_config.json",
             R"({"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]})");
  EXPECT_EQ(model_chat_template(model_in(dir))->source, "D");
  write_file(dir / "tokenizer_config.json", R"({"chat_template": [{"name": "tool_use", "template": "T"}]})");
  EXPECT_TRUE(contains(error_of([&] { model_chat_template(model_in(dir)); }), "no template named \"default\""));
  write_file(dir / "tokenizer_config.json", R"({"chat_template": 3})");
  EXPECT_TRUE(contains(error_of([&] { model_chat_template(model_in(dir)); }), "must be a string or a list"));
}

TEST(ChatTemplateSource, JinjaFileComesFirst) {
  TempDir dir("chat_src");
  write_file(dir / "tokenizer_config.json", R"({"chat_template": "from config"})");
  write_file(dir / "chat_template.jinja", "from jinja");
  const std::optional<ChatTemplateText> t = model_chat_template(model_in(dir));
  EXPECT_EQ(t->source, "from jinja");
  EXPECT_TRUE(contains(t->origin, "chat_template.jinja"));
  EXPECT_TRUE(contains(error_of([] { read_chat_template_file("/no/such/template.jinja"); }), "/no/such/template.jinja"));
}

}  // namespace
}  // namespace gatedlm::io
