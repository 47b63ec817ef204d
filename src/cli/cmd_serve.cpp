// gatedlm serve: the OpenAI-compatible completions server (serve/http_server.h).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <optional>

#include "cli/commands.h"
#include "cli/infer_options.h"
#include "cli/number_checks.h"
#include "io/chat_template_source.h"
#include "io/model_loader.h"
#include "serve/http_server.h"

namespace gatedlm::cli {

namespace {

// --chat-template FILE, else the model's own (io/chat_template_source.h), parsed once: a
// bad template stops the server at start, naming the file and line.
std::optional<chat::JinjaTemplate> load_chat_template(const io::LoadedModel& lm, const std::string& file) {
  const std::optional<io::ChatTemplateText> text =
      file.empty() ? io::model_chat_template(lm) : io::read_chat_template_file(file);
  if (!text) {
    std::fprintf(stderr, "no chat template: /v1/chat/completions answers 400 (--chat-template FILE gives one)\n");
    return std::nullopt;
  }
  std::fprintf(stderr, "chat template: %s\n", text->origin.c_str());
  return chat::JinjaTemplate::parse(text->source, text->origin);
}

}  // namespace

void register_serve(CLI::App& app) {
  struct Options {
    std::string checkpoint, tokenizer, chat_template;
    serve::ServeOptions serve;
    double request_timeout_s = 10;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "serve",
      "Serve a checkpoint over HTTP: POST /v1/completions and /v1/chat/completions (OpenAI-compatible, stream: true "
      "for server-sent events; chat through the model's chat template or --chat-template), "
      "GET /v1/models, GET /health, POST /tokenize, POST /detokenize. Concurrent requests decode together "
      "(continuous batching). Listens on loopback unless --host says otherwise; SIGTERM finishes the requests in "
      "flight, then exits.");
  add_checkpoint_options(sub, opt->checkpoint, opt->tokenizer);
  sub->add_option("--host", opt->serve.host, "address to listen on")->capture_default_str();
  sub->add_option("--port", opt->serve.port, "port (0: any free port, printed at start)")->capture_default_str();
  sub->add_option("--max-batch", opt->serve.max_batch, "requests decoding at once")->capture_default_str();
  sub->add_flag("!--no-packed-weights", opt->serve.packed_weights,
                "decode batches of more than 4 requests multiply by the plain weights: slower, but no packed copy "
                "(as much memory again as the weights, made when such a batch first runs)");
  sub->add_option("--max-queue", opt->serve.max_queue, "requests waiting for a slot before 503")->capture_default_str();
  sub->add_option("--context", opt->serve.context, "tokens per request, prompt and completion (0: max_seq_len)")
      ->capture_default_str()
      ->check(at_least(0));
  add_kv_type_option(sub, opt->serve.kv_type);
  sub->add_option("--prefix-cache-bytes", opt->serve.prefix_cache_bytes,
                  "memory for the prefix cache: a prompt that starts like an earlier one (a chat resending its "
                  "history) restores that prefix's KV rows and, for hybrids, Gated DeltaNet snapshots instead of "
                  "recomputing it; the same tokens as without; least recently used entries go first (0: off)")
      ->capture_default_str()
      ->check(at_least(0));
  sub->add_option("--api-key", opt->serve.api_key, "require Authorization: Bearer KEY (401 otherwise)");
  sub->add_option("--max-body-bytes", opt->serve.max_body_bytes,
                  "largest request body, as sent and as decoded from gzip, deflate or br (413 above)")
      ->capture_default_str()
      ->check(at_least(1));
  sub->add_option("--max-connections", opt->serve.connections.max_connections,
                  "open connections in all, one worker thread each (503 above; /health is still answered)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, serve::kMaxConnections));
  sub->add_option("--max-connections-per-client", opt->serve.connections.max_per_client,
                  "open connections from one client address (503 above)")
      ->capture_default_str()
      ->check(at_least(1));
  sub->add_option("--request-timeout", opt->request_timeout_s,
                  "seconds to receive one whole request, headers and body (408 after, and the connection closed)")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 3600.0));
  sub->add_option("--chat-template", opt->chat_template,
                  "a Jinja chat template file for /v1/chat/completions (default: the model's own, from its "
                  "tokenizer_config.json, chat_template.jinja or GGUF metadata)");
  sub->add_option("--model-name", opt->serve.model_name, "the model id reported by /v1/models")->capture_default_str();
  sub->callback([opt] {
    opt->serve.connections.request_timeout =
        std::chrono::milliseconds(static_cast<int64_t>(opt->request_timeout_s * 1000 + 0.5));
    const io::LoadedModel lm = io::load_model(opt->checkpoint, io::ModelLoadOptions::reading_text(opt->tokenizer));
    opt->serve.chat_template = load_chat_template(lm, opt->chat_template);
    serve::serve(*lm.model, *lm.tokenizer, opt->serve);
  });
}

}  // namespace gatedlm::cli
