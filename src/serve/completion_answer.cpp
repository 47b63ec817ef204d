#include "serve/completion_answer.h"

#include <chrono>

#include "serve/chat_reply.h"

namespace gatedlm::serve {

using nlohmann::json;

namespace {

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string finish_reason(infer::FinishReason r) {
  return r == infer::FinishReason::length ? "length" : "stop";  // OpenAI's words: EOS and stop strings are "stop"
}

// Per-request ids: PREFIX-<counter>.
std::string next_id(const std::string& prefix) {
  static std::atomic<uint64_t> counter{0};
  return prefix + "-" + std::to_string(++counter);
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// usage (cached_tokens: prompt tokens restored from the prefix cache, OpenAI's field), and
// the scheduler's error if there was one, added to a final answer or event.
json with_usage(json j, const infer::Request& r) {
  j["usage"] = {{"prompt_tokens", r.prompt_tokens()}, {"completion_tokens", r.completion_tokens()},
                {"total_tokens", r.prompt_tokens() + r.completion_tokens()},
                {"prompt_tokens_details", {{"cached_tokens", r.cached_tokens()}}}};
  if (!r.error().empty()) j["error"] = {{"message", r.error()}};
  return j;
}

// The provider of a streamed answer: the first event, then one per text that came, the last.
httplib::ContentProviderWithoutLength stream_provider(const std::shared_ptr<infer::Request>& r,
                                                      std::shared_ptr<bool> finished, const AnswerShape& shape) {
  auto started = std::make_shared<bool>(false);
  return [r, finished, shape, started](size_t, httplib::DataSink& sink) {
    std::string out;
    if (!*started && shape.first_event) out += "data: " + dump(shape.first_event()) + "\n\n";
    *started = true;
    std::string text;
    const bool done = r->wait(text, std::chrono::milliseconds(500));
    const json event = text.empty() ? json() : shape.text_event(text);
    if (!event.is_null()) out += "data: " + dump(event) + "\n\n";
    if (done) out += "data: " + dump(with_usage(shape.last_event(*r), *r)) + "\n\ndata: [DONE]\n\n";
    if (out.empty()) out = ": waiting\n\n";
    if (!sink.write(out.data(), out.size())) return false;
    if (done) {
      *finished = true;
      sink.done();
    }
    return true;
  };
}

httplib::ContentProviderWithoutLength whole_provider(const std::shared_ptr<infer::Request>& r,
                                                     std::shared_ptr<bool> finished, const AnswerShape& shape) {
  return [r, finished, shape](size_t, httplib::DataSink& sink) {
    std::string text;
    while (!r->wait(text, std::chrono::milliseconds(1000)))
      if (!sink.write(" ", 1)) return false;
    const std::string all = dump(with_usage(shape.whole(text, *r), *r));
    if (!sink.write(all.data(), all.size())) return false;
    *finished = true;
    sink.done();
    return true;
  };
}

// {id, object, created, model, choices: [choice]}.
std::function<json(const json& choice, const std::string& object)> envelope(const std::string& id,
                                                                             const std::string& model_name) {
  const int64_t created = unix_now();
  return [id, model_name, created](const json& choice, const std::string& object) {
    return json{{"id", id}, {"object", object}, {"created", created}, {"model", model_name},
                {"choices", json::array({choice})}};
  };
}

}  // namespace

AnswerShape text_completion_shape(const std::string& model_name) {
  const auto body = envelope(next_id("cmpl"), model_name);
  auto choice = [body](const std::string& text, const json& reason) {
    return body({{"text", text}, {"index", 0}, {"logprobs", nullptr}, {"finish_reason", reason}}, "text_completion");
  };
  AnswerShape s;
  s.text_event = [choice](const std::string& text) { return choice(text, nullptr); };
  s.last_event = [choice](const infer::Request& r) { return choice("", finish_reason(r.finish_reason())); };
  s.whole = [choice](const std::string& text, const infer::Request& r) {
    return choice(text, finish_reason(r.finish_reason()));
  };
  return s;
}

AnswerShape chat_completion_shape(const std::string& model_name, const ChatRequest& request) {
  const std::string id = next_id("chatcmpl");
  const auto body = envelope(id, model_name);
  auto chunk = [body](const json& delta, const json& reason) {
    return body({{"index", 0}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", reason}},
                "chat.completion.chunk");
  };
  // The stream's deltas split as the whole answer is (chat_reply.h): reasoning_content,
  // content, tool_calls.
  auto split = std::make_shared<ChatReplyStream>(request.thinking_open, request.tools_given, "call_" + id);
  auto delta_of = [](const ChatDelta& d) {
    json delta = json::object();
    if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
    if (!d.content.empty()) delta["content"] = d.content;
    if (!d.tool_calls.empty()) delta["tool_calls"] = d.tool_calls;
    return delta;
  };
  AnswerShape s;
  s.first_event = [chunk] { return chunk({{"role", "assistant"}, {"content", ""}}, nullptr); };
  s.text_event = [chunk, split, delta_of](const std::string& text) {
    const ChatDelta d = split->push(text);
    return d.empty() ? json() : chunk(delta_of(d), nullptr);
  };
  s.last_event = [chunk, split, delta_of](const infer::Request& r) {
    const ChatDelta d = split->finish();
    return chunk(delta_of(d), split->tool_call_count() > 0 ? "tool_calls" : finish_reason(r.finish_reason()));
  };
  const bool thinking_open = request.thinking_open, tools = request.tools_given;
  s.whole = [body, id, thinking_open, tools](const std::string& text, const infer::Request& r) {
    const ChatReply reply = split_chat_reply(text, thinking_open, tools, "call_" + id);
    json message = {{"role", "assistant"}, {"content", reply.content}};
    if (reply.reasoning) message["reasoning_content"] = *reply.reasoning;
    if (!reply.tool_calls.empty()) {
      message["tool_calls"] = reply.tool_calls;
      if (reply.content.empty()) message["content"] = nullptr;
    }
    const std::string reason = reply.tool_calls.empty() ? finish_reason(r.finish_reason()) : "tool_calls";
    return body({{"index", 0}, {"message", message}, {"logprobs", nullptr}, {"finish_reason", reason}},
                "chat.completion");
  };
  return s;
}

void answer_completion(const std::shared_ptr<infer::Request>& r, bool stream, const AnswerShape& shape,
                       std::atomic<int64_t>& open_responses, httplib::Response& res) {
  auto finished = std::make_shared<bool>(false);
  ++open_responses;
  auto release = [r, finished, &open_responses](bool) {
    if (!*finished) r->cancel();
    --open_responses;
  };
  if (stream) {
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider("text/event-stream", stream_provider(r, finished, shape), release);
  } else {
    res.set_chunked_content_provider("application/json", whole_provider(r, finished, shape), release);
  }
}

}  // namespace gatedlm::serve
