#pragma once
// A chat model's generated text split as OpenAI's chat answers carry it, as it streams:
//   - reasoning: a leading <think>...</think> block, or, when the prompt already opened
//     <think> (thinking_open), the text before the first </think> (all of it when the
//     reply ends before closing it): reasoning_content, trimmed;
//   - tool calls (only when the request offered tools): Qwen3's
//     <tool_call>{"name": ..., "arguments": {...}}</tool_call> blocks, each a
//     {id, type: "function", function: {name, arguments: a JSON string}}; a block whose
//     JSON is not such an object stays in the content;
//   - content: the rest. Once a block was split out, the whitespace the templates put
//     around blocks is dropped (at the start of the content and at its end); a reply with
//     no block is left exactly as generated.
// One algorithm for both answers: ChatReplyStream takes the text piece by piece, holding
// back only what the next pieces may still change (a partial tag, a tool call not yet
// closed, trailing whitespace); split_chat_reply runs it over the whole text. So a streamed
// answer's deltas add up to the whole answer.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace gatedlm::serve {

struct ChatDelta {
  std::string reasoning, content;
  nlohmann::json tool_calls = nlohmann::json::array();
  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
};

class ChatReplyStream {
 public:
  // id_prefix names the calls: "<id_prefix>_<index>".
  ChatReplyStream(bool thinking_open, bool parse_tool_calls, std::string id_prefix);
  ChatDelta push(std::string_view text);  // what the text so far decides
  ChatDelta finish();                      // the rest, at the end of the reply
  bool has_reasoning() const { return reasoning_seen_; }
  int64_t tool_call_count() const { return calls_; }

 private:
  enum class State { start, reasoning, content };
  void run(ChatDelta& out, bool at_end);
  bool step_start(bool at_end);
  bool step_reasoning(ChatDelta& out, bool at_end);
  bool step_content(ChatDelta& out, bool at_end);
  void emit_reasoning(ChatDelta& out, std::string_view text);
  void emit_content(ChatDelta& out, std::string_view text);
  bool take_tool_call(ChatDelta& out, std::string_view inside);

  State state_;
  bool parse_tool_calls_;
  std::string id_prefix_;
  std::string pending_;        // text not decided yet
  std::string held_space_;     // trailing whitespace of the reasoning or content so far
  bool reasoning_seen_ = false, reasoning_started_ = false;
  bool split_ = false;          // a reasoning block or a tool call was taken out
  bool content_started_ = false;
  int64_t calls_ = 0;
};

struct ChatReply {
  std::string content;
  std::optional<std::string> reasoning;  // none when the reply had no reasoning block
  nlohmann::json tool_calls = nlohmann::json::array();
};

ChatReply split_chat_reply(const std::string& text, bool thinking_open, bool parse_tool_calls,
                           const std::string& id_prefix);

}  // namespace gatedlm::serve
