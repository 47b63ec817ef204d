#include "serve/chat_reply.h"

namespace gatedlm::serve {

using nlohmann::json;

namespace {

constexpr std::string_view kThinkOpen = "<think>", kThinkClose = "</think>";
constexpr std::string_view kCallOpen = "<tool_call>", kCallClose = "</tool_call>";
constexpr std::string_view kSpace = " \t\r\n";

// The length of the longest end of text that begins tag without completing it: held back,
// since the next piece may complete the tag.
size_t partial_tag_at_end(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n)
    if (tag.starts_with(text.substr(text.size() - n))) return n;
  return 0;
}

// One <tool_call> block's JSON as an OpenAI tool call, or null when it is not {name, arguments}.
json tool_call(std::string_view inside, const std::string& id) {
  const json call = json::parse(inside, nullptr, /*allow_exceptions=*/false);
  if (!call.is_object() || !call.contains("name") || !call["name"].is_string()) return nullptr;
  const json args = call.contains("arguments") ? call["arguments"] : json::object();
  const std::string arguments = args.is_string() ? args.get<std::string>() : args.dump();
  return {{"id", id}, {"type", "function"}, {"function", {{"name", call["name"]}, {"arguments", arguments}}}};
}

}  // namespace

ChatReplyStream::ChatReplyStream(bool thinking_open, bool parse_tool_calls, std::string id_prefix)
    : state_(thinking_open ? State::reasoning : State::start),
      parse_tool_calls_(parse_tool_calls),
      id_prefix_(std::move(id_prefix)),
      reasoning_seen_(thinking_open),
      split_(thinking_open) {}

ChatDelta ChatReplyStream::push(std::string_view text) {
  pending_ += text;
  ChatDelta out;
  run(out, /*at_end=*/false);
  return out;
}

ChatDelta ChatReplyStream::finish() {
  ChatDelta out;
  run(out, /*at_end=*/true);
  // Trailing whitespace stays only in a reply that had no block split out of it.
  if (state_ == State::content && !split_) out.content += held_space_;
  held_space_.clear();
  return out;
}

void ChatReplyStream::run(ChatDelta& out, bool at_end) {
  for (bool progress = true; progress;) {
    switch (state_) {
      case State::start: progress = step_start(at_end); break;
      case State::reasoning: progress = step_reasoning(out, at_end); break;
      case State::content: progress = step_content(out, at_end); break;
    }
  }
}

// Before anything: a <think> after optional whitespace opens the reasoning; anything else
// is content.
bool ChatReplyStream::step_start(bool at_end) {
  const size_t first = pending_.find_first_not_of(kSpace);
  const std::string_view rest = first == std::string::npos ? "" : std::string_view(pending_).substr(first);
  if (rest.starts_with(kThinkOpen)) {
    pending_.erase(0, first + kThinkOpen.size());
    state_ = State::reasoning;
    reasoning_seen_ = split_ = true;
    return true;
  }
  if (!at_end && kThinkOpen.starts_with(rest)) return false;  // all whitespace, or "<thi" so far
  state_ = State::content;
  return true;
}

bool ChatReplyStream::step_reasoning(ChatDelta& out, bool at_end) {
  const size_t close = pending_.find(kThinkClose);
  if (close != std::string::npos) {
    emit_reasoning(out, std::string_view(pending_).substr(0, close));
    pending_.erase(0, close + kThinkClose.size());
    held_space_.clear();  // the reasoning's trailing whitespace
    state_ = State::content;
    return true;
  }
  const size_t keep = at_end ? 0 : partial_tag_at_end(pending_, kThinkClose);
  emit_reasoning(out, std::string_view(pending_).substr(0, pending_.size() - keep));
  pending_.erase(0, pending_.size() - keep);
  return false;
}

bool ChatReplyStream::step_content(ChatDelta& out, bool at_end) {
  const size_t open = parse_tool_calls_ ? pending_.find(kCallOpen) : std::string::npos;
  if (open == std::string::npos) {
    const size_t keep = at_end || !parse_tool_calls_ ? 0 : partial_tag_at_end(pending_, kCallOpen);
    emit_content(out, std::string_view(pending_).substr(0, pending_.size() - keep));
    pending_.erase(0, pending_.size() - keep);
    return false;
  }
  emit_content(out, std::string_view(pending_).substr(0, open));
  pending_.erase(0, open);
  const size_t close = pending_.find(kCallClose, kCallOpen.size());
  if (close == std::string::npos) {
    if (!at_end) return false;  // the call is not closed yet
    emit_content(out, pending_);
    pending_.clear();
    return false;
  }
  const size_t end = close + kCallClose.size();
  const std::string_view inside = std::string_view(pending_).substr(kCallOpen.size(), close - kCallOpen.size());
  if (!take_tool_call(out, inside)) emit_content(out, std::string_view(pending_).substr(0, end));
  pending_.erase(0, end);
  return true;
}

bool ChatReplyStream::take_tool_call(ChatDelta& out, std::string_view inside) {
  json call = tool_call(inside, id_prefix_ + "_" + std::to_string(calls_));
  if (call.is_null()) return false;
  call["index"] = calls_++;
  out.tool_calls.push_back(std::move(call));
  split_ = true;
  return true;
}

// Reasoning without its leading whitespace; trailing whitespace waits for more text.
void ChatReplyStream::emit_reasoning(ChatDelta& out, std::string_view text) {
  if (!reasoning_started_) {
    const size_t first = text.find_first_not_of(kSpace);
    if (first == std::string_view::npos) return;
    text.remove_prefix(first);
    reasoning_started_ = true;
  }
  const size_t last = text.find_last_not_of(kSpace);
  if (last == std::string_view::npos) {
    held_space_ += text;
    return;
  }
  out.reasoning += held_space_;
  out.reasoning += text.substr(0, last + 1);
  held_space_ = text.substr(last + 1);
}

// Content, its trailing whitespace held back (finish() decides); after a split-out block,
// the whitespace before the first content is dropped.
void ChatReplyStream::emit_content(ChatDelta& out, std::string_view text) {
  const size_t last = text.find_last_not_of(kSpace);
  if (last == std::string_view::npos) {
    held_space_ += text;
    return;
  }
  if (content_started_ || !split_) out.content += held_space_;
  std::string_view body = text.substr(0, last + 1);
  if (!content_started_ && split_) body.remove_prefix(std::min(body.find_first_not_of(kSpace), body.size()));
  out.content += body;
  content_started_ = true;
  held_space_ = text.substr(last + 1);
}

ChatReply split_chat_reply(const std::string& text, bool thinking_open, bool parse_tool_calls,
                           const std::string& id_prefix) {
  ChatReplyStream stream(thinking_open, parse_tool_calls, id_prefix);
  ChatDelta all = stream.push(text);
  ChatDelta rest = stream.finish();
  ChatReply reply;
  reply.content = all.content + rest.content;
  if (stream.has_reasoning()) reply.reasoning = all.reasoning + rest.reasoning;
  for (json* calls : {&all.tool_calls, &rest.tool_calls})
    for (json& c : *calls) {
      c.erase("index");
      reply.tool_calls.push_back(std::move(c));
    }
  return reply;
}

}  // namespace gatedlm::serve
