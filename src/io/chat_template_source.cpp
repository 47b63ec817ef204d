#include "io/chat_template_source.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "chat/jinja_template.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_file.h"
#include "io/gguf_format.h"
#include "io/gguf_reader.h"

namespace gatedlm::io {

namespace fs = std::filesystem;

namespace {

// Far above any real template (Qwen3.5's is about 8 KiB); a path to /dev/zero costs no more.
constexpr size_t kMaxTemplateBytes = 16 << 20;

// tokenizer_config.json's chat_template: a string, or transformers' list of named ones.
std::optional<std::string> template_in_config(const nlohmann::json& config, const std::string& path) {
  if (!config.is_object() || !config.contains("chat_template") || config["chat_template"].is_null()) return {};
  const nlohmann::json& t = config["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  if (!t.is_array()) fail(path, ": chat_template must be a string or a list of {name, template}");
  for (const nlohmann::json& named : t)
    if (named.is_object() && named.value("name", "") == "default" && named.contains("template") &&
        named["template"].is_string())
      return named["template"].get<std::string>();
  fail(path, ": chat_template is a list with no template named \"default\"");
}

}  // namespace

ChatTemplateText read_chat_template_file(const std::string& path) {
  return {read_file_at_most(path, kMaxTemplateBytes, "chat template"), path};
}

std::optional<ChatTemplateText> gguf_chat_template(const std::string& path) {
  const GgufReader file(path);
  if (!file.has(kGgufChatTemplateKey)) return {};
  return ChatTemplateText{file.get_string(kGgufChatTemplateKey), path + " (" + kGgufChatTemplateKey + ")"};
}

std::optional<ChatTemplateText> directory_chat_template(const std::string& dir) {
  const fs::path jinja = fs::path(dir) / kChatTemplateFile;
  if (fs::is_regular_file(jinja)) return read_chat_template_file(jinja.string());
  const fs::path config_path = fs::path(dir) / "tokenizer_config.json";
  if (!fs::is_regular_file(config_path)) return {};
  const nlohmann::json config = read_json_file(config_path.string(), "tokenizer config");
  if (std::optional<std::string> t = template_in_config(config, config_path.string()))
    return ChatTemplateText{*t, config_path.string()};
  return {};
}

std::optional<ChatTemplateText> model_chat_template(const LoadedModel& model) {
  if (model.kind == ModelFileKind::gguf_file) return gguf_chat_template(model.checkpoint_dir);
  // The tokenizer's directory first: the template belongs with the vocabulary it speaks.
  std::vector<fs::path> dirs;
  if (fs::is_regular_file(model.tokenizer_source)) dirs.push_back(fs::path(model.tokenizer_source).parent_path());
  if (fs::is_directory(model.checkpoint_dir)) dirs.push_back(model.checkpoint_dir);
  for (const fs::path& dir : dirs)
    if (std::optional<ChatTemplateText> t = directory_chat_template(dir.string())) return t;
  return {};
}

std::optional<ChatTemplateText> chat_template_to_carry(const std::string& dir_or_gguf) {
  std::optional<ChatTemplateText> t =
      fs::is_directory(dir_or_gguf) ? directory_chat_template(dir_or_gguf) : gguf_chat_template(dir_or_gguf);
  if (t) chat::JinjaTemplate::parse(t->source, t->origin);  // only to refuse a bad one
  return t;
}

void write_chat_template(const ChatTemplateText& text, const std::string& dir) {
  write_file_atomic((fs::path(dir) / kChatTemplateFile).string(), text.source);
}

}  // namespace gatedlm::io
