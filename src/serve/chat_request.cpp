#include "serve/chat_request.h"

#include <set>
#include <string_view>

#include "chat/chat_template.h"
#include "core/error.h"
#include "serve/request_fields.h"

namespace gatedlm::serve {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

const std::set<std::string> kRoles = {"system", "developer", "user", "assistant", "tool"};

// A message's content as the template reads it: a string; null as "" (an assistant turn
// that only calls tools); a list of text parts joined.
std::string content_text(const ordered_json& content, const std::string& where) {
  if (content.is_null()) return "";
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    throw InvalidRequest("messages", where + ".content must be a string, null or a list of text parts");
  std::string text;
  for (const ordered_json& part : content) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
      throw InvalidRequest("messages", where + ".content: only {\"type\": \"text\", \"text\": ...} parts are served");
    text += part["text"].get<std::string>();
  }
  return text;
}

// The messages checked, their contents made strings; every other key passed as it came
// (assistant tool_calls, tool_call_id, name, reasoning_content: the template reads them).
ordered_json template_messages(const ordered_json& messages) {
  if (!messages.is_array() || messages.empty())
    throw InvalidRequest("messages", "'messages' must be a non-empty list of messages");
  ordered_json out = ordered_json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string where = "messages[" + std::to_string(i) + "]";
    const ordered_json& m = messages[i];
    if (!m.is_object()) throw InvalidRequest("messages", where + " must be an object");
    if (!m.contains("role") || !m["role"].is_string() || !kRoles.count(m["role"].get<std::string>()))
      throw InvalidRequest("messages", where + ".role must be one of system, developer, user, assistant, tool");
    if (m.contains("tool_calls") && !m["tool_calls"].is_null() && !m["tool_calls"].is_array())
      throw InvalidRequest("messages", where + ".tool_calls must be a list");
    ordered_json copy = m;
    copy["content"] = content_text(m.contains("content") ? m["content"] : ordered_json(), where);
    out.push_back(std::move(copy));
  }
  return out;
}

// tools (null or a list) and chat_template_kwargs (null or an object), checked.
void check_template_inputs(const ordered_json& body) {
  if (body.contains("tools") && !body["tools"].is_null() && !body["tools"].is_array())
    throw InvalidRequest("tools", "'tools' must be a list");
  if (body.contains("chat_template_kwargs") && !body["chat_template_kwargs"].is_null() &&
      !body["chat_template_kwargs"].is_object())
    throw InvalidRequest("chat_template_kwargs", "'chat_template_kwargs' must be an object");
}

std::string render(const chat::JinjaTemplate& chat_template, const ordered_json& body, const ChatTokens& tokens) {
  check_template_inputs(body);
  const ordered_json messages = template_messages(body["messages"]);
  const ordered_json tools = body.contains("tools") ? body["tools"] : ordered_json();
  const ordered_json kwargs = body.contains("chat_template_kwargs") ? body["chat_template_kwargs"] : ordered_json();
  try {
    return chat::render_chat(chat_template, messages, tools, /*add_generation_prompt=*/true, kwargs, tokens.bos,
                             tokens.eos);
  } catch (const chat::TemplateError& e) {
    // The detail and line, not the origin: that is a path on the server.
    const std::string at = e.line > 0 ? " (template line " + std::to_string(e.line) + ")" : "";
    throw InvalidRequest("messages", (e.raised_by_template ? "the chat template refused the conversation: "
                                                           : "the chat template failed on the conversation: ") +
                                         e.detail + at);
  }
}

// An id's text, or "" where the tokenizer has none to print (the byte tokenizer's BOS).
std::string token_text(const io::Tokenizer& tokenizer, int32_t id) {
  try {
    return tokenizer.decode({id});
  } catch (const Error&) {
    return "";
  }
}

// Qwen3's templates with thinking on end the prompt with "<think>\n": the reply starts
// inside the reasoning and only closes it.
bool ends_inside_think(const std::string& prompt) {
  const size_t end = prompt.find_last_not_of(" \t\r\n");
  return end != std::string::npos && std::string_view(prompt).substr(0, end + 1).ends_with("<think>");
}

}  // namespace

ChatTokens chat_tokens(const io::Tokenizer& tokenizer) {
  ChatTokens t{token_text(tokenizer, tokenizer.bos_id()), token_text(tokenizer, tokenizer.eos_id()), ""};
  const std::string im_end = "<|im_end|>";
  try {
    if (tokenizer.encode(im_end).size() == 1) t.end_of_turn = im_end;
  } catch (const Error&) {
  }
  return t;
}

ChatRequest parse_chat(const std::string& body, const chat::JinjaTemplate& chat_template, const ChatTokens& tokens,
                       const io::Tokenizer& tokenizer, int64_t vocab, int64_t context, uint64_t default_seed) {
  const json j = parse_object(body, {"model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p",
                                     "top_k", "min_p", "repetition_penalty", "seed", "stop", "stream", "n", "user",
                                     "ignore_eos", "tools", "tool_choice", "chat_template_kwargs", "stream_options"});
  if (!j.contains("messages")) throw InvalidRequest("messages", "'messages' is required");
  // Parsed again keeping the client's key order (a tool schema's, as tojson prints it);
  // parse_object has already bounded its depth and refused repeated keys.
  const ordered_json ordered = ordered_json::parse(body);
  ChatRequest r;
  r.prompt_text = render(chat_template, ordered, tokens);
  r.completion.prompt = encode(tokenizer, r.prompt_text, "messages");
  if (r.completion.prompt.empty()) throw InvalidRequest("messages", "the chat template rendered an empty prompt");
  const GenerationLimits limits{vocab, context, default_seed, /*default_max_tokens=*/context, "messages"};
  parse_generation_fields(j, tokenizer, limits, r.completion);
  if (!tokens.end_of_turn.empty()) r.completion.rules.stop.push_back(tokens.end_of_turn);
  r.tools_given = j.contains("tools") && j["tools"].is_array() && !j["tools"].empty();
  r.thinking_open = ends_inside_think(r.prompt_text);
  return r;
}

}  // namespace gatedlm::serve
