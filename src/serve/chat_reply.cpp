#include "serve/chat_reply.h"

#include <string_view>

namespace gatedlm::serve {

using nlohmann::json;

namespace {

constexpr std::string_view kThinkOpen = "<think>", kThinkClose = "</think>";
constexpr std::string_view kCallOpen = "<tool_call>", kCallClose = "</tool_call>";

std::string trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return "";
  return std::string(s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1));
}

// The reasoning split off the front of text; text keeps what follows it.
std::optional<std::string> take_reasoning(std::string& text, bool thinking_open) {
  std::string_view rest = text;
  const size_t lead = rest.find_first_not_of(" \t\r\n");
  if (lead != std::string_view::npos && rest.substr(lead).starts_with(kThinkOpen)) {
    rest = rest.substr(lead + kThinkOpen.size());
  } else if (!thinking_open) {
    return std::nullopt;
  }
  const size_t close = rest.find(kThinkClose);
  std::string reasoning = trim(rest.substr(0, close));
  text = close == std::string_view::npos ? "" : std::string(rest.substr(close + kThinkClose.size()));
  return reasoning;
}

// One <tool_call> block's JSON as an OpenAI tool call, or null when it is not {name, arguments}.
json tool_call(std::string_view inside, const std::string& id) {
  const json call = json::parse(inside, nullptr, /*allow_exceptions=*/false);
  if (!call.is_object() || !call.contains("name") || !call["name"].is_string()) return nullptr;
  const json args = call.contains("arguments") ? call["arguments"] : json::object();
  const std::string arguments = args.is_string() ? args.get<std::string>() : args.dump();
  return {{"id", id},
          {"type", "function"},
          {"function", {{"name", call["name"]}, {"arguments", arguments}}}};
}

// The tool calls taken out of text (appended to calls); what stays is the content.
std::string take_tool_calls(const std::string& text, json& calls, const std::string& id_prefix) {
  std::string content;
  size_t at = 0;
  for (;;) {
    const size_t open = text.find(kCallOpen, at);
    const size_t close = open == std::string::npos ? open : text.find(kCallClose, open + kCallOpen.size());
    if (close == std::string::npos) break;
    const std::string_view inside =
        std::string_view(text).substr(open + kCallOpen.size(), close - open - kCallOpen.size());
    json call = tool_call(inside, id_prefix + "_" + std::to_string(calls.size()));
    const size_t end = close + kCallClose.size();
    content += text.substr(at, call.is_null() ? end - at : open - at);
    if (!call.is_null()) calls.push_back(std::move(call));
    at = end;
  }
  return content + text.substr(at);
}

}  // namespace

ChatReply split_chat_reply(const std::string& text, bool thinking_open, bool parse_tool_calls,
                           const std::string& id_prefix) {
  ChatReply reply;
  std::string rest = text;
  reply.reasoning = take_reasoning(rest, thinking_open);
  if (parse_tool_calls) rest = take_tool_calls(rest, reply.tool_calls, id_prefix);
  // Only around what was split out: a plain reply is the model's text as streamed.
  const bool split = reply.reasoning || !reply.tool_calls.empty();
  reply.content = split ? trim(rest) : rest;
  return reply;
}

}  // namespace gatedlm::serve
