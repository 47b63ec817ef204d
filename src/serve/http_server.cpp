#include "serve/http_server.h"

#include <httplib.h>
#include <malloc.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <random>
#include <thread>

#include "core/error.h"
#include "core/signal_handlers.h"
#include "infer/scheduler.h"
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

std::string finish_reason(infer::FinishReason r) {
  return r == infer::FinishReason::length ? "length" : "stop";  // OpenAI's words: EOS and stop strings are "stop"
}

// Per-request ids: cmpl-<counter>.
std::string next_id() {
  static std::atomic<uint64_t> counter{0};
  return "cmpl-" + std::to_string(++counter);
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

bool reads_body(const std::string& path) { return path == "/v1/completions" || path == "/tokenize" || path == "/detokenize"; }

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
  if (o.context < 0) fail("--context must not be negative (0: the model's max_seq_len), got ", o.context);
  if (o.connections.max_connections < 1 || o.connections.max_connections > kMaxConnections)
    fail("--max-connections must be in [1, ", kMaxConnections, "] (a worker thread each), got ",
         o.connections.max_connections);
  if (o.connections.max_per_client < 1)
    fail("--max-connections-per-client must be at least 1, got ", o.connections.max_per_client);
  if (o.connections.request_timeout.count() < 1) fail("--request-timeout must be positive");
}

// The answer to an accepted completion: server-sent events (stream) or one JSON object,
// written by a content provider that waits on the request r.
void answer_completion(const std::shared_ptr<infer::Request>& r, bool stream, const std::string& model_name,
                       std::atomic<int64_t>& open_responses, httplib::Response& res) {
  const std::string id = next_id(), name = model_name;
  const int64_t created = unix_now();
  auto choice = [&](const std::string& text, const json& reason) {
    return json{{"text", text}, {"index", 0}, {"logprobs", nullptr}, {"finish_reason", reason}};
  };
  auto body = [id, created, name](const json& ch) {
    return json{{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", name},
                {"choices", json::array({ch})}};
  };
  // Both answers are written by a content provider that waits on the request: a write
  // that fails (the client left) cancels it, which frees its slot. Heartbeats while
  // nothing comes: an SSE comment, or JSON's insignificant leading whitespace.
  auto finished = std::make_shared<bool>(false);
  ++open_responses;
  auto release = [r, finished, &open_responses](bool) {
    if (!*finished) r->cancel();
    --open_responses;
  };
  if (stream) {
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [r, finished, body, choice](size_t, httplib::DataSink& sink) {
          std::string text;
          const bool done = r->wait(text, std::chrono::milliseconds(500));
          std::string out;
          if (!text.empty()) out += "data: " + body(choice(text, nullptr)).dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
          if (done) {
            json last = body(choice("", finish_reason(r->finish_reason())));
            last["usage"] = {{"prompt_tokens", r->prompt_tokens()}, {"completion_tokens", r->completion_tokens()},
                             {"total_tokens", r->prompt_tokens() + r->completion_tokens()}};
            if (!r->error().empty()) last["error"] = {{"message", r->error()}};
            out += "data: " + last.dump() + "\n\ndata: [DONE]\n\n";
          }
          if (out.empty()) out = ": waiting\n\n";
          if (!sink.write(out.data(), out.size())) return false;
          if (done) {
            *finished = true;
            sink.done();
          }
          return true;
        },
        release);
    return;
  }
  res.set_chunked_content_provider(
      "application/json",
      [r, finished, body, choice](size_t, httplib::DataSink& sink) {
        std::string text;
        std::string all;
        for (;;) {
          const bool done = r->wait(text, std::chrono::milliseconds(1000));
          if (done) break;
          if (!sink.write(" ", 1)) return false;
        }
        json j = body(choice(text, finish_reason(r->finish_reason())));
        j["usage"] = {{"prompt_tokens", r->prompt_tokens()}, {"completion_tokens", r->completion_tokens()},
                      {"total_tokens", r->prompt_tokens() + r->completion_tokens()}};
        if (!r->error().empty()) j["error"] = {{"message", r->error()}};
        all = j.dump(-1, ' ', false, json::error_handler_t::replace);
        if (!sink.write(all.data(), all.size())) return false;
        *finished = true;
        sink.done();
        return true;
      },
      release);
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
  std::fprintf(stderr, "listening on http://%s:%d (max batch %lld, queue %lld, context %lld)\n", o.host.c_str(), port,
               static_cast<long long>(o.max_batch), static_cast<long long>(o.max_queue),
               static_cast<long long>(scheduler.context()));
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

}  // namespace

void serve(model::Model<float>& model, const io::Tokenizer& tokenizer, const ServeOptions& o) {
  check_options(o);
  // Request bodies of up to --max-body-bytes come and go on many worker threads: glibc would
  // raise its mmap threshold after the first such buffer is freed and keep the later ones in
  // per-thread arenas (bench/hostile_load.py: RSS 39 -> 133 MiB, held after the load). A fixed
  // threshold sends every buffer past 256 KiB to the OS and back (peak 59 MiB).
  mallopt(M_MMAP_THRESHOLD, 256 << 10);
  infer::Scheduler scheduler(model, {o.max_batch, o.max_queue, o.context, o.packed_weights});
  const int64_t vocab = model.config().vocab_size, context = scheduler.context();
  std::random_device entropy;
  std::mutex seed_mu;
  std::mt19937_64 seeds((static_cast<uint64_t>(entropy()) << 32) ^ entropy());

  // Responses still being written; SIGTERM waits for them (httplib's stop() would cut a
  // chunked response short) while new completions get 503.
  std::atomic<int64_t> open_responses{0};
  std::atomic<bool> draining{false};

  GuardedServer svr(o.connections);
  install_guards(svr, o);

  svr.Get("/health", [&](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, {{"status", "ok"}, {"active", scheduler.active()}, {"queued", scheduler.queued()}});
  });
  svr.Get("/v1/models", [&](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200,
              {{"object", "list"},
               {"data", {{{"id", o.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "gatedlm"},
                          {"context_length", context}}}}});
  });
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
  post_with_body(svr, "/v1/completions", o.max_body_bytes, [&](const std::string& request_body, httplib::Response& res) {
    CompletionRequest cr;
    uint64_t seed;
    {
      std::lock_guard<std::mutex> lock(seed_mu);
      seed = seeds();
    }
    try {
      cr = parse_completion(request_body, tokenizer, vocab, context, seed);
    } catch (const InvalidRequest& e) {
      return send_error(res, 400, e.what(), e.param);
    }
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
    answer_completion(r, cr.stream, o.model_name, open_responses, res);
  });

  listen_until_stopped(svr, o, scheduler, open_responses, draining);
  std::fprintf(stderr, "stopped\n");
}

}  // namespace gatedlm::serve
