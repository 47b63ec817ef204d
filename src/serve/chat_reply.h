#pragma once
// A chat model's generated text split as OpenAI's chat answers carry it:
//   - reasoning: a leading <think>...</think> block, or, when the prompt already opened
//     <think> (thinking_open), the text before the first </think> (all of it when the
//     reply ends before closing it): reasoning_content;
//   - tool calls (only when the request offered tools): Qwen3's
//     <tool_call>{"name": ..., "arguments": {...}}</tool_call> blocks, each a
//     {id, type: "function", function: {name, arguments: a JSON string}}; a block whose
//     JSON is not such an object stays in the content;
//   - content: the rest, trimmed of the newlines the templates put around those blocks
//     (a reply with neither block is left as it is, the text a stream sends).
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace gatedlm::serve {

struct ChatReply {
  std::string content;
  std::optional<std::string> reasoning;  // none when the reply had no reasoning block
  nlohmann::json tool_calls = nlohmann::json::array();
};

// id_prefix names the calls: "<id_prefix>_<index>".
ChatReply split_chat_reply(const std::string& text, bool thinking_open, bool parse_tool_calls,
                           const std::string& id_prefix);

}  // namespace gatedlm::serve
