#pragma once
// Where a model's chat template (the Jinja text that turns a conversation into a prompt) is
// read from, for `gatedlm serve`. In order:
//   1. --chat-template FILE, when given: the file's text as it is;
//   2. a GGUF file's metadata string tokenizer.chat_template;
//   3. beside the model's tokenizer (the Hugging Face directory, or the directory that
//      holds the tokenizer file in use): chat_template.jinja, else tokenizer_config.json's
//      "chat_template": a string, or a list of {"name", "template"} of which the one
//      named "default" is taken (transformers' rule).
// Only the text is read here; chat/jinja_template.h parses it.
//
// `import` and `export` carry the template across by the same rules: a checkpoint keeps it
// as chat_template.jinja (rule 3 finds it there), a Hugging Face export likewise, a GGUF
// export as tokenizer.chat_template (rule 2).
#include <optional>
#include <string>

#include "io/model_loader.h"

namespace gatedlm::io {

// The file a checkpoint or a Hugging Face export holds its template in (transformers'
// name). In a GGUF file it is io/gguf_format.h's kGgufChatTemplateKey.
inline constexpr const char* kChatTemplateFile = "chat_template.jinja";

struct ChatTemplateText {
  std::string source;  // the Jinja text
  std::string origin;  // where it came from, for error messages: a path, "FILE (key)"
};

// Rule 1: throws naming the path when the file cannot be read.
ChatTemplateText read_chat_template_file(const std::string& path);
// Rule 2 for one GGUF file: nullopt when it has none. Throws naming the file when it is no
// GGUF file, or the key is not a string.
std::optional<ChatTemplateText> gguf_chat_template(const std::string& path);
// Rule 3 for one directory: nullopt when it has none. Throws naming the file when a
// tokenizer_config.json is malformed or its chat_template is of another shape.
std::optional<ChatTemplateText> directory_chat_template(const std::string& dir);
// Rules 2 and 3 for a loaded model: nullopt when it has none.
std::optional<ChatTemplateText> model_chat_template(const LoadedModel& model);

// For import and export: the template a model directory (rule 3) or a GGUF file (rule 2)
// holds, parsed as serve parses it (chat::JinjaTemplate) so that no bad template is carried
// into another model; nullopt when it has none. Throws naming its origin and the line, before
// the caller writes anything.
std::optional<ChatTemplateText> chat_template_to_carry(const std::string& dir_or_gguf);
// Writes the template's text, byte for byte, as DIR/chat_template.jinja (atomically).
void write_chat_template(const ChatTemplateText& text, const std::string& dir);

}  // namespace gatedlm::io
