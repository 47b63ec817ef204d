// A chat template in GGUF: export_gguf writes it under llama.cpp's key
// tokenizer.chat_template (read back by the test's own GGUF reader), and serve's template
// source (io::model_chat_template, rule 2) finds it there byte for byte; a file without one
// has none. chat_template_to_carry refuses a template that does not parse, naming the line.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "gguf_test_reader.h"
#include "io/chat_template_source.h"
#include "io/gguf.h"
#include "model/param_layout.h"
#include "test_files.h"
#include "test_util.h"

namespace gatedlm::io {
namespace {

namespace fs = std::filesystem;
using testing::contains;
using testing::error_of;
using testing::TempDir;
using testing::write_file;

// Qwen3's shape of template, with what a byte-for-byte copy must keep: CRLF, a tab, trailing
// spaces, UTF-8 and no final newline.
constexpr const char* kTemplate =
    "{%- for m in messages %}<|im_start|>{{ m.role }}\r\n{{ m.content }}<|im_end|>\n{% endfor -%}\t"
    "{%- if add_generation_prompt %}<|im_start|>assistant  \n{% endif %}— é";

Checkpoint byte_checkpoint() {
  const nlohmann::json j{{"vocab_size", kByteVocabularySize}, {"d_model", 32}, {"n_layers", 1}, {"n_heads", 2},
                         {"n_kv_heads", 1}, {"head_dim", 16}, {"ffn_hidden", 32}, {"max_seq_len", 16}};
  Checkpoint ck{model::config_from_json(j, "test"), {}};
  ck.params = testing::random_vector<float>(model::ParamLayout(ck.config).total(), 3, 0.1);
  return ck;
}

LoadedModel gguf_model(const fs::path& path) {
  LoadedModel lm;
  lm.kind = ModelFileKind::gguf_file;
  lm.checkpoint_dir = path.string();
  return lm;
}

TEST(ChatTemplateGguf, ExportWritesLlamaCppsKeyAndServeFindsIt) {
  TempDir dir("chat_gguf");
  const fs::path with = dir / "with.gguf", without = dir / "without.gguf";
  export_gguf(byte_checkpoint(), model::uniform_recipe(kernels::ElementType::f32), kByteVocabulary, with.string(),
              "auto", kTemplate);
  export_gguf(byte_checkpoint(), kernels::ElementType::f32, kByteVocabulary, without.string());

  const testing::GgufTestFile f = testing::read_gguf_for_test(with.string());
  ASSERT_TRUE(f.metadata.count("tokenizer.chat_template"));
  EXPECT_EQ(std::get<std::string>(f.metadata.at("tokenizer.chat_template")), kTemplate);

  const std::optional<ChatTemplateText> t = model_chat_template(gguf_model(with));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->source, kTemplate);
  EXPECT_TRUE(contains(t->origin, "with.gguf")) << t->origin;
  EXPECT_TRUE(contains(t->origin, "tokenizer.chat_template")) << t->origin;
  EXPECT_FALSE(model_chat_template(gguf_model(without)));
  EXPECT_FALSE(testing::read_gguf_for_test(without.string()).metadata.count("tokenizer.chat_template"));
}

TEST(ChatTemplateGguf, CarryParsesFirstAndWritesTheTextAsItIs) {
  TempDir dir("chat_carry");
  const fs::path gguf = dir / "m.gguf";
  export_gguf(byte_checkpoint(), model::uniform_recipe(kernels::ElementType::f32), kByteVocabulary, gguf.string(),
              "auto", kTemplate);
  const std::optional<ChatTemplateText> t = chat_template_to_carry(gguf.string());
  ASSERT_TRUE(t);
  fs::create_directories(dir / "out");
  write_chat_template(*t, (dir / "out").string());
  EXPECT_EQ(testing::read_file(dir / "out" / kChatTemplateFile), kTemplate);
  EXPECT_EQ(chat_template_to_carry((dir / "out").string())->source, kTemplate);

  fs::create_directories(dir / "bad");
  write_file(dir / "bad" / kChatTemplateFile, "line one\n{% for %}\n");
  const std::string e = error_of([&] { chat_template_to_carry((dir / "bad").string()); });
  EXPECT_TRUE(contains(e, "chat_template.jinja")) << e;
  EXPECT_TRUE(contains(e, "line 2")) << e;
  EXPECT_FALSE(chat_template_to_carry(dir.path().string()));  // a directory with none
}

}  // namespace
}  // namespace gatedlm::io
