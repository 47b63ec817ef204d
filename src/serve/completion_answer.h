#pragma once
// The answer to an accepted completion, for both endpoints: server-sent events (stream) or
// one JSON object, written by a content provider that waits on the scheduler's request. A
// write that fails (the client left) cancels the request, which frees its slot; while
// nothing comes, heartbeats (an SSE comment, or JSON's insignificant leading whitespace) let
// a gone client be noticed. What differs between /v1/completions and /v1/chat/completions
// is the JSON they write: an AnswerShape.
#include <httplib.h>

#include <atomic>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "infer/scheduler.h"
#include "serve/chat_request.h"

namespace gatedlm::serve {

struct AnswerShape {
  std::function<nlohmann::json()> first_event;  // sent before any text; null: none
  std::function<nlohmann::json(const std::string& text)> text_event;  // null: nothing to send yet
  std::function<nlohmann::json(const infer::Request& done)> last_event;  // finish_reason (usage added)
  std::function<nlohmann::json(const std::string& text, const infer::Request& done)> whole;  // usage added
};

// {id: "cmpl-N", object: "text_completion", choices: [{text, ...}]}.
AnswerShape text_completion_shape(const std::string& model_name);
// {id: "chatcmpl-N", object: "chat.completion" (".chunk" streamed), choices: [{message or
// delta, ...}]}; both split reasoning and tool calls out of the text (chat_reply.h).
AnswerShape chat_completion_shape(const std::string& model_name, const ChatRequest& request);

// open_responses counts the answers being written (SIGTERM waits for them).
void answer_completion(const std::shared_ptr<infer::Request>& r, bool stream, const AnswerShape& shape,
                       std::atomic<int64_t>& open_responses, httplib::Response& res);

}  // namespace gatedlm::serve
