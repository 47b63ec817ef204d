#include "io/chat_template_source.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_file.h"
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

std::optional<ChatTemplateText> template_in_directory(const fs::path& dir) {
  const fs::path jinja = dir / "chat_template.jinja";
  if (fs::is_regular_file(jinja)) return read_chat_template_file(jinja.string());
  const fs::path config_path = dir / "tokenizer_config.json";
  if (!fs::is_regular_file(config_path)) return {};
  const nlohmann::json config = read_json_file(config_path.string(), "tokenizer config");
  if (std::optional<std::string> t = template_in_config(config, config_path.string()))
    return ChatTemplateText{*t, config_path.string()};
  return {};
}

}  // namespace

ChatTemplateText read_chat_template_file(const std::string& path) {
  return {read_file_at_most(path, kMaxTemplateBytes, "chat template"), path};
}

std::optional<ChatTemplateText> model_chat_template(const LoadedModel& model) {
  if (model.kind == ModelFileKind::gguf_file) {
    const GgufReader file(model.checkpoint_dir);
    if (file.has("tokenizer.chat_template"))
      return ChatTemplateText{file.get_string("tokenizer.chat_template"),
                              model.checkpoint_dir + " (tokenizer.chat_template)"};
    return {};
  }
  // The tokenizer's directory first: the template belongs with the vocabulary it speaks.
  std::vector<fs::path> dirs;
  if (fs::is_regular_file(model.tokenizer_source)) dirs.push_back(fs::path(model.tokenizer_source).parent_path());
  if (fs::is_directory(model.checkpoint_dir)) dirs.push_back(model.checkpoint_dir);
  for (const fs::path& dir : dirs)
    if (std::optional<ChatTemplateText> t = template_in_directory(dir)) return t;
  return {};
}

}  // namespace gatedlm::io
