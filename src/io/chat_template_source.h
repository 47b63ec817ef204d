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
#include <optional>
#include <string>

#include "io/model_loader.h"

namespace gatedlm::io {

struct ChatTemplateText {
  std::string source;  // the Jinja text
  std::string origin;  // where it came from, for error messages: a path, "FILE (key)"
};

// Rule 1: throws naming the path when the file cannot be read.
ChatTemplateText read_chat_template_file(const std::string& path);
// Rules 2 and 3 for a loaded model: nullopt when it has none. Throws naming the file when
// a tokenizer_config.json is malformed or its chat_template is of another shape.
std::optional<ChatTemplateText> model_chat_template(const LoadedModel& model);

}  // namespace gatedlm::io
