#include "serve/http_server.h"

#include <httplib.h>
#include <malloc.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <memory>
#include <mutex>
#include <new>
#include <random>
#include <stdexcept>
#include <thread>

#include "core/error.h"
#include "core/signal_handlers.h"
#include "infer/scheduler.h"
#include "serve/chat_request.h"
#include "serve/completion_answer.h"
#include "serve/completion_request.h"
#include "serve/request_body.h"

namespace gatedlm::serve {

using nlohmann::json;

namespace {

std::atomic<bool> g_stop{false};
extern "C" void on_stop_signal(int) { g_stop = true; }

void send_json(httplib::Response& res, int status, const json& j) {
  res.status = status;
  res.set_content(j.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void send_error(httplib::Response& res, int status, const std::string& message, const std::string& param,
                const std::string& type = "invalid_request_error") {
  send_json(res, status,
            {{"error", {{"message", message}, {"type", type}, {"param", param.empty() ? json() : json(param)}}}});
}

bool reads_body(const std::string& path) {
  return path == "/v1/completions" || path == "/v1/chat/completions" || path == "/tokenize" || path == "/detokenize";
}

bool carries_body(const httplib::Request& req) {
  return req.has_header("Transfer-Encoding") ||
         (req.has_header("Content-Length") && req.get_header_value("Content-Length") != "0");
}

// An answer given without reading the request's body: the connection closes after it, as
// the bytes that follow are the body, not a next request.
void refuse_unread(httplib::Response& res) {
  close_after_response();
  res.set_header("Connection", "close");
}

// Everything answered before a handler reads a body: the API key, a body sent where none
// is read (httplib would read it whole into memory, with no limit on a chunked one), a
// Content-Length over the limit behind "Expect: 100-continue"; JSON for the library's errors.
void install_guards(GuardedServer& svr, const ServeOptions& o) {
  svr.set_payload_max_length(static_cast<size_t>(o.max_body_bytes));
  svr.set_read_timeout(o.connections.request_timeout);
  svr.set_write_timeout(30, 0);
  svr.set_pre_routing_handler([&o](const httplib::Request& req, httplib::Response& res) {
    const bool authorized = o.api_key.empty() || req.path == "/health" ||
                            req.get_header_value("Authorization") == "Bearer " + o.api_key;
    if (!authorized) {
      res.set_header("WWW-Authenticate", "Bearer");
      send_error(res, 401, "missing or wrong API key (Authorization: Bearer KEY)", "", "authentication_error");
    } else if (carries_body(req) && !(req.method == "POST" && reads_body(req.path))) {
      if (reads_body(req.path) || req.path == "/health" || req.path == "/v1/models")
        send_error(res, 405, req.method + " " + req.path + " is not served (or takes no body)", "");
      else
        send_error(res, 404, "no such endpoint", "");
    } else {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    if (carries_body(req)) refuse_unread(res);
    return httplib::Server::HandlerResponse::Handled;
  });
  svr.set_expect_100_continue_handler([&o](const httplib::Request& req, httplib::Response& res) {
    const std::optional<BodyRefusal> refusal = check_declared_length(req, o.max_body_bytes);
    if (!refusal) return 100;
    refuse_unread(res);
    send_error(res, refusal->status, refusal->message, "");
    return refusal->status;
  });
  // 413 (body over the limit) and 404 come from the library with an empty body: give them JSON.
  svr.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 413)
      send_error(res, 413, "the request body is over the server's limit (--max-body-bytes)", "");
    else if (res.status == 404)
      send_error(res, 404, "no such endpoint", "");
    else
      send_error(res, res.status, "request failed", "");
  });
}

// POST `path` with a JSON body: read within the limit (request_body.h), then handled.
void post_with_body(GuardedServer& svr, const std::string& path, int64_t max_bytes,
                    std::function<void(const std::string& body, httplib::Response& res)> handle) {
  svr.Post(path, [max_bytes, handle](const httplib::Request& req, httplib::Response& res,
                                     const httplib::ContentReader& reader) {
    const Body body = read_body(req, reader, max_bytes);
    if (body.refusal) {
      refuse_unread(res);
      return send_error(res, body.refusal->status, body.refusal->message, "");
    }
    handle(body.text, res);
  });
}

void check_options(const ServeOptions& o) {
  if (o.max_batch < 1) fail("--max-batch must be at least 1, got ", o.max_batch);
  if (o.max_queue < 0) fail("--max-queue must not be negative, got ", o.max_queue);
  if (o.port < 0 || o.port > 65535) fail("--port must be in [0, 65535], got ", o.port);
  if (o.max_body_bytes < 1) fail("--max-body-bytes must be at least 1, got ", o.max_body_bytes);
  if (o.prefix_cache_bytes < 0) fail("--prefix-cache-bytes must not be negative (0: no cache), got ", o.prefix_cache_bytes);
  if (o.context < 0) fail("--context must not be negative (0: the model's max_seq_len), got ", o.context);
  if (o.connections.max_connections < 1 || o.connections.max_connections > kMaxConnections)
    fail("--max-connections must be in [1, ", kMaxConnections, "] (a worker thread each), got ",
         o.connections.max_connections);
  if (o.connections.max_per_client < 1)
    fail("--max-connections-per-client must be at least 1, got ", o.connections.max_per_client);
  if (o.connections.request_timeout.count() < 1) fail("--request-timeout must be positive");
}

// Listens until SIGTERM/SIGINT, then lets the requests in flight finish (new completions
// get 503 meanwhile: draining) and returns.
void listen_until_stopped(GuardedServer& svr, const ServeOptions& o, infer::Scheduler& scheduler,
                          const std::atomic<int64_t>& open_responses, std::atomic<bool>& draining) {
  // SIGTERM/SIGINT: stop listening; listen() returns once the requests in flight are done.
  g_stop = false;
  core::install_signal_handler(SIGTERM, on_stop_signal);
  core::install_signal_handler(SIGINT, on_stop_signal);
  std::signal(SIGPIPE, SIG_IGN);
  const int port = o.port == 0 ? svr.bind_to_any_port(o.host) : (svr.bind_to_port(o.host, o.port) ? o.port : -1);
  if (port < 0) fail("serve: cannot listen on ", o.host, ":", o.port, " (in use, or not a local address)");
  svr.widen_listen_backlog();
  std::fprintf(stderr,
               "listening on http://%s:%d (max batch %lld, queue %lld, context %lld, prefix cache %s, kv cache %s)\n",
               o.host.c_str(), port, static_cast<long long>(o.max_batch), static_cast<long long>(o.max_queue),
               static_cast<long long>(scheduler.context()), scheduler.prefix_cache_status().c_str(),
               kernels::element_name(o.kv_type));
  std::fflush(stderr);
  std::atomic<bool> listening_done{false};
  std::thread watcher([&] {
    while (!g_stop && !listening_done) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (g_stop) {
      std::fprintf(stderr, "stopping: finishing the requests in flight\n");
      draining = true;
      while (open_responses > 0 || scheduler.active() > 0 || scheduler.queued() > 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      svr.stop();
    }
  });
  svr.listen_after_bind();
  listening_done = true;
  watcher.join();
  scheduler.drain();
}

// What the completion endpoints share: a seed for each request that gives none, the
// scheduler's queue, and the answers in flight that SIGTERM waits for (httplib's stop()
// would cut a chunked response short) while new completions get 503 (draining).
struct CompletionService {
  CompletionService(infer::Scheduler& s, uint64_t seed) : scheduler(s), seeds(seed) {}
  infer::Scheduler& scheduler;
  std::atomic<int64_t> open_responses{0};
  std::atomic<bool> draining{false};
  std::mutex seed_mu;
  std::mt19937_64 seeds;

  uint64_t next_seed() {
    std::lock_guard<std::mutex> lock(seed_mu);
    return seeds();
  }

  // Queues a parsed request and answers it, or answers why not (503 draining or queue full;
  // 400 for what the scheduler refuses).
  void accept(const CompletionRequest& cr, const AnswerShape& shape, const io::Tokenizer& tokenizer,
              httplib::Response& res) {
    if (draining) {
      res.set_header("Retry-After", "5");
      return send_error(res, 503, "the server is shutting down", "", "server_busy");
    }
    std::shared_ptr<infer::Request> r;
    try {
      r = scheduler.submit(cr.prompt, cr.sampling, cr.rules, &tokenizer);
    } catch (const Error& e) {
      return send_error(res, 400, e.what(), "max_tokens");
    }
    if (!r) {
      res.set_header("Retry-After", "1");
      return send_error(res, 503, "the request queue is full; retry later", "", "server_busy");
    }
    answer_completion(r, cr.stream, shape, open_responses, res);
  }
};

void install_completions(GuardedServer& svr, const ServeOptions& o, CompletionService& service,
                         const io::Tokenizer& tokenizer, int64_t vocab) {
  const int64_t context = service.scheduler.context();
  post_with_body(svr, "/v1/completions", o.max_body_bytes, [&, vocab, context](const std::string& body,
                                                                              httplib::Response& res) {
    CompletionRequest cr;
    try {
      cr = parse_completion(body, tokenizer, vocab, context, service.next_seed());
    } catch (const InvalidRequest& e) {
      return send_error(res, 400, e.what(), e.param);
    }
    service.accept(cr, text_completion_shape(o.model_name), tokenizer, res);
  });
  const ChatTokens tokens = chat_tokens(tokenizer);
  post_with_body(svr, "/v1/chat/completions", o.max_body_bytes, [&, vocab, context, tokens](const std::string& body,
                                                                                          httplib::Response& res) {
    if (!o.chat_template)
      return send_error(res, 400,
                        "the model has no chat template (none in its tokenizer_config.json, chat_template.jinja or "
                        "GGUF metadata): start the server with --chat-template FILE",
                        "messages");
    ChatRequest cr;
    try {
      cr = parse_chat(body, *o.chat_template, tokens, tokenizer, vocab, context, service.next_seed());
    } catch (const InvalidRequest& e) {
      return send_error(res, 400, e.what(), e.param);
    }
    service.accept(cr.completion, chat_completion_shape(o.model_name, cr), tokenizer, res);
  });
}

void install_token_routes(GuardedServer& svr, const ServeOptions& o, const io::Tokenizer& tokenizer) {
  post_with_body(svr, "/tokenize", o.max_body_bytes, [&](const std::string& body, httplib::Response& res) {
    try {
      send_json(res, 200, {{"tokens", parse_tokenize(body, tokenizer)}});
    } catch (const InvalidRequest& e) {
      send_error(res, 400, e.what(), e.param);
    }
  });
  post_with_body(svr, "/detokenize", o.max_body_bytes, [&](const std::string& body, httplib::Response& res) {
    try {
      send_json(res, 200, {{"content", detokenize(body, tokenizer)}});
    } catch (const InvalidRequest& e) {
      send_error(res, 400, e.what(), e.param);
    }
  });
}

// The scheduler, whose KV cache holds --max-batch requests of the context each. A cache that
// does not fit is refused naming the flags that size it: a Qwen3.5 model's max_seq_len of
// 262144 tokens (--context 0) for 8 requests is tens of GB.
std::unique_ptr<infer::Scheduler> start_scheduler(model::Model<float>& model, const ServeOptions& o) {
  try {
    return std::make_unique<infer::Scheduler>(
        model, infer::SchedulerOptions{o.max_batch, o.max_queue, o.context, o.packed_weights, o.prefix_cache_bytes,
                                       o.kv_type});
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
  const int64_t context = o.context > 0 ? o.context : model.config().max_seq_len;
  fail("serve: the KV cache of --max-batch ", o.max_batch, " requests of ", context, " tokens each",
       o.context > 0 ? "" : " (--context 0: the model's max_seq_len)",
       " does not fit in memory: give a shorter --context (e.g. 4096) or a smaller --max-batch");
}

}  // namespace

void serve(model::Model<float>& model, const io::Tokenizer& tokenizer, const ServeOptions& o) {
  check_options(o);
  // Request bodies of up to --max-body-bytes come and go on many worker threads: glibc would
  // raise its mmap threshold after the first such buffer is freed and keep the later ones in
  // per-thread arenas (bench/hostile_load.py: RSS 39 -> 133 MiB, held after the load). A fixed
  // threshold sends every buffer past 256 KiB to the OS and back (peak 59 MiB).
  mallopt(M_MMAP_THRESHOLD, 256 << 10);
  const std::unique_ptr<infer::Scheduler> owned = start_scheduler(model, o);
  infer::Scheduler& scheduler = *owned;
  const int64_t context = scheduler.context();
  std::random_device entropy;
  CompletionService service(scheduler, (static_cast<uint64_t>(entropy()) << 32) ^ entropy());

  GuardedServer svr(o.connections);
  install_guards(svr, o);

  svr.Get("/health", [&](const httplib::Request&, httplib::Response& res) {
    json health = {{"status", "ok"},
                   {"active", scheduler.active()},
                   {"queued", scheduler.queued()},
                   {"kv_type", kernels::element_name(o.kv_type)}};
    const infer::PrefixCacheStats cache = scheduler.prefix_cache_stats();
    if (cache.budget > 0)
      health["prefix_cache"] = {{"budget_bytes", cache.budget}, {"bytes", cache.bytes}, {"entries", cache.entries},
                                {"reused_tokens", cache.reused_tokens}};
    send_json(res, 200, health);
  });
  svr.Get("/v1/models", [&](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200,
              {{"object", "list"},
               {"data", {{{"id", o.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "gatedlm"},
                          {"context_length", context}}}}});
  });
  install_token_routes(svr, o, tokenizer);
  install_completions(svr, o, service, tokenizer, model.config().vocab_size);

  listen_until_stopped(svr, o, scheduler, service.open_responses, service.draining);
  std::fprintf(stderr, "stopped\n");
}

}  // namespace gatedlm::serve
