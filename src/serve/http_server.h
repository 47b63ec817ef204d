#pragma once
// `gatedlm serve`: an OpenAI-compatible completions and chat server over the continuous-batching
// scheduler (infer/scheduler.h). The only room of the tree that knows HTTP (cpp-httplib).
//
//   POST /v1/chat/completions  {messages, tools, chat_template_kwargs, max_completion_tokens
//                           and the fields below}: the conversation rendered by the chat
//                           template (chat_request.h), the reply split into content,
//                           reasoning_content and tool_calls (chat_reply.h)
//   POST /v1/completions   {prompt, max_tokens, temperature, top_p, top_k, min_p,
//                           repetition_penalty, seed, stop, stream, model, n, user,
//                           ignore_eos (an extension, as llama.cpp's: generate past EOS)}
//                           stream: true answers with server-sent events
//   GET  /v1/models, GET /health
//   POST /tokenize {content, add_bos?} -> {tokens};  POST /detokenize {tokens} -> {content}
//
// Bad input: malformed JSON, unknown fields, wrong types or out-of-range values answer
// 400 with {"error": {"message", "type", "param"}} naming the field (a key given twice
// too); a body over the limit 413, decoded or chunked, counted as it arrives, and from the
// Content-Length before anything is read; a request slower than --request-timeout 408;
// past the connection caps 503 (guarded_server.h: /health is answered whatever the load);
// a full queue 503 with Retry-After; with an API key, a request without
// "Authorization: Bearer KEY" 401 (/health stays open). A client that disconnects frees
// its slot. SIGTERM (or SIGINT) stops accepting, finishes the requests in flight and
// returns.
#include <cstdint>
#include <optional>
#include <string>

#include "chat/jinja_template.h"

#include "io/tokenizer.h"
#include "kernels/element_types.h"
#include "model/model.h"
#include "serve/guarded_server.h"

namespace gatedlm::serve {

// The most --max-connections: the server starts a worker thread for each.
inline constexpr int64_t kMaxConnections = 4096;

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8080;              // 0: any free port (printed)
  int64_t max_batch = 8;
  bool packed_weights = true;  // infer::DecoderOptions::packed_weights
  int64_t max_queue = 64;
  int64_t context = 0;          // tokens per sequence; 0 = the model's max_seq_len
  kernels::ElementType kv_type = kernels::ElementType::f32;  // infer::DecoderOptions::kv_type
  // The prefix cache's budget (infer/prefix_reuse.h; docs/serving.md says why this default):
  // KV rows and recurrent snapshots of earlier prompts. 0: no cache.
  int64_t prefix_cache_bytes = int64_t{1} << 30;
  std::string api_key;          // empty: no authentication
  int64_t max_body_bytes = 1 << 20;  // the body as sent and as decoded (gzip, deflate, br)
  ConnectionLimits connections;       // caps and the request deadline (guarded_server.h)
  std::string model_name = "gatedlm";
  // The model's chat template, parsed (io/chat_template_source.h says where it is read
  // from); none: /v1/chat/completions answers 400 naming --chat-template.
  std::optional<chat::JinjaTemplate> chat_template;
};

// Serves until SIGTERM/SIGINT. Prints "listening on http://HOST:PORT" to stderr (and
// flushes) once the socket is bound.
void serve(model::Model<float>& model, const io::Tokenizer& tokenizer, const ServeOptions& options);

}  // namespace gatedlm::serve
