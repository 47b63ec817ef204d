#include "fuzz_entries.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "analysis/report.h"
#include "chat/chat_template.h"
#include "chat/jinja_template.h"
#include "core/error.h"
#include "core/zeroed_allocator.h"
#include "core/json_file.h"
#include "fixed_tokenizer_json.h"
#include "io/hf_config.h"
#include "io/gguf_import.h"
#include "io/gguf_reader.h"
#include "io/hf_convert.h"
#include "io/safetensors.h"
#include "io/token_dataset.h"
#include "io/token_ids.h"
#include "io/tokenizer.h"
#include "io/tokenizer_json.h"
#include "model/config.h"
#include "model/param_layout.h"
#include "model/quantized_weights.h"
#include "serve/chat_request.h"
#include "serve/completion_request.h"

namespace gatedlm::fuzz {
namespace {

namespace fs = std::filesystem;

// A scratch directory per process, reused by every input, removed when the process exits
// normally (a crash leaves it, with the files of the input that crashed).
struct ScratchDir {
  fs::path path;
  ScratchDir() {
    const char* tmp = std::getenv("TMPDIR");
    path = fs::path(tmp && *tmp ? tmp : "/tmp") / ("gatedlm_fuzz_" + std::to_string(::getpid()));
    fs::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

const fs::path& scratch() {
  static const ScratchDir dir;
  return dir.path;
}

fs::path write(const std::string& name, const uint8_t* data, size_t size) {
  const fs::path p = scratch() / name;
  std::ofstream(p, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data),
                                                             static_cast<std::streamsize>(size));
  return p;
}

// Runs f; a gatedlm::Error is a refusal (fine), anything else propagates and is a finding.
template <typename F>
void refusals_allowed(F&& f) {
  try {
    f();
  } catch (const Error&) {
  }
}

void require(bool ok, const std::string& what);

void safetensors(const uint8_t* data, size_t size) {
  const fs::path p = write("t.safetensors", data, size);
  refusals_allowed([&] {
    io::SafetensorsReader r(p.string());
    for (const auto& [name, e] : r.tensors())
      if (e.dtype == "F32" && e.numel() <= (1 << 20)) {
        std::vector<float> v;
        r.read_f32(name, v);
      }
  });
}

void config_json(const uint8_t* data, size_t size) {
  const fs::path p = write("config.json", data, size);
  refusals_allowed([&] {
    const model::ModelConfig c = model::load_config(p.string());
    const model::ParamLayout layout(c);
    (void)layout.total();
    (void)model::config_from_json(model::config_to_json(c), "round trip");
  });
}

// A Hugging Face config.json: through `import` itself (beside a weights file with no
// tensors, so the import stops at the first missing tensor, after every config check), then
// the accepted config back out in both formats; what export writes, import must read back
// to the same gatedlm config.
void hf_config_json(const uint8_t* data, size_t size) {
  const fs::path dir = scratch() / "hf";
  fs::create_directories(dir);
  const fs::path config = dir / "config.json";
  std::ofstream(config, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  const std::string empty_safetensors = std::string("\x02\0\0\0\0\0\0\0{}", 10);
  std::ofstream(dir / "model.safetensors", std::ios::binary | std::ios::trunc) << empty_safetensors;
  refusals_allowed([&] { (void)io::import_hf(dir.string(), std::nullopt); });
  refusals_allowed([&] {
    const nlohmann::json hf = read_json_file(config.string(), "Hugging Face config");
    const model::ModelConfig c = io::config_from_hf(hf, io::detect_hf_format(hf), config.string());
    for (const io::HfFormat f : {io::HfFormat::paper, io::HfFormat::qwen3})
      refusals_allowed([&] {
        const nlohmann::json out = nlohmann::json::parse(io::config_to_hf(c, f, "float32").dump());
        const model::ModelConfig back = io::config_from_hf(out, f, "exported config.json");
        require(model::config_to_json(back) == model::config_to_json(c), "export then import changes the config");
      });
  });
}

// [u32 manifest bytes][manifest.json][u32 train bytes][train.bin][val.bin = the rest]
void dataset(const uint8_t* data, size_t size) {
  const fs::path dir = scratch() / "dataset";
  fs::remove_all(dir);
  fs::create_directories(dir);
  size_t at = 0;
  auto part = [&](const char* name, bool rest) {
    uint32_t n = static_cast<uint32_t>(size - at);
    if (!rest) {
      if (size - at < 4) return;
      std::memcpy(&n, data + at, 4);
      at += 4;
      n = static_cast<uint32_t>(std::min<size_t>(n, size - at));
    }
    std::ofstream(dir / name, std::ios::binary).write(reinterpret_cast<const char*>(data + at), n);
    at += n;
  };
  part("manifest.json", false);
  part("train.bin", false);
  part("val.bin", true);
  refusals_allowed([&] {
    const io::TokenDataset ds = io::TokenDataset::open(dir.string());
    (void)ds.load_split("train");
    (void)ds.load_split("val");
  });
}

void token_ids(const uint8_t* data, size_t size) {
  const fs::path p = write("ids.txt", data, size);
  refusals_allowed([&] { (void)io::read_token_ids(p.string(), io::TokenIdLimits{258, 64, 2, "max_seq_len"}); });
}

void tokenizer_model(const uint8_t* data, size_t size) {
  const fs::path p = write("tokenizer.model", data, size);
  refusals_allowed([&] {
    const auto t = io::Tokenizer::load(p.string());
    const std::vector<int32_t> ids = t->encode("Hello, world. The pass key is 31415.");
    (void)t->decode(ids);
  });
}

// A property the code promises and broke: a finding like a crash (std::logic_error is not
// a gatedlm::Error, so it escapes refusals_allowed).
void require(bool ok, const std::string& what) {
  if (!ok) throw std::logic_error("fuzz property broken: " + what);
}

// The texts every loaded tokenizer.json encodes: ASCII, contractions, many scripts and
// combining marks (for NFC), emoji, whitespace runs, the added tokens.
const char* const kSampleTexts[] = {
    "Hello, world. The pass key is 31415.",
    "I'm you're we've they'll it's   \t\t\n\n  x",
    "Gr\xc3\xbc\xc3\x9f" "e, na\xc3\xafve e\xcc\x81 \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x98\x80",
    "<|endoftext|>the<|im_start|>user\n",
};

void tokenizer_json(const uint8_t* data, size_t size) {
  const fs::path p = write("tokenizer.json", data, size);
  refusals_allowed([&] {
    const auto t = io::load_tokenizer_json(p.string());
    for (const char* text : kSampleTexts) {
      std::vector<int32_t> ids;
      try {
        ids = t->encode(text);  // a regex from the file may run out of its matching budget: a refusal
      } catch (const Error&) {
        continue;
      }
      for (int32_t id : ids) require(id >= 0 && id < t->vocab_size(), "encode gave an id outside the vocabulary");
      (void)t->decode(ids);
    }
    // Every id alone (a hole in the ids is refused by name).
    for (int32_t id = 0; id < std::min<int64_t>(t->vocab_size(), 4096); ++id) refusals_allowed([&] { t->decode({id}); });
  });
}

// The fixed tokenizer (fixed_tokenizer_json.h), loaded once.
const io::Tokenizer& fixed_tokenizer() {
  static const std::unique_ptr<io::Tokenizer> t = [] {
    const std::string json = kFixedTokenizerJson;
    return io::load_tokenizer_json(
        write("fixed_tokenizer.json", reinterpret_cast<const uint8_t*>(json.data()), json.size()).string());
  }();
  return *t;
}

// Any bytes through the fixed tokenizer: refused (not UTF-8) or encoded to ids that decode
// to the very bytes (byte-level BPE without a normalizer loses nothing).
void tokenizer_json_text(const uint8_t* data, size_t size) {
  const io::Tokenizer& t = fixed_tokenizer();
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<int32_t> ids;
  try {
    ids = t.encode(text);
  } catch (const Error&) {
    return;
  }
  for (int32_t id : ids) require(id >= 0 && id < t.vocab_size(), "encode gave an id outside the vocabulary");
  require(t.decode(ids) == text, "decode(encode(text)) is not the text");
}

// One body through the three POST endpoints' parsers (as http_server.cpp calls them): an
// answer or an InvalidRequest (the 400), nothing else; what is accepted is within limits.
void serve_request(const uint8_t* data, size_t size) {
  const io::Tokenizer& t = fixed_tokenizer();
  const std::string body(reinterpret_cast<const char*>(data), size);
  const int64_t vocab = t.vocab_size(), context = 64;
  try {
    const serve::CompletionRequest r = serve::parse_completion(body, t, vocab, context, 12345);
    require(!r.prompt.empty() && static_cast<int64_t>(r.prompt.size()) < context, "prompt length");
    require(r.rules.max_tokens >= 1 && r.rules.max_tokens + static_cast<int64_t>(r.prompt.size()) <= context,
            "max_tokens past the context");
    for (int32_t id : r.prompt) require(id >= 0 && id < vocab, "prompt id outside the vocabulary");
    require(r.sampling.top_k >= 0 && r.sampling.top_k <= vocab, "top_k");
    require(r.sampling.temperature >= 0 && r.sampling.top_p > 0 && r.sampling.top_p <= 1, "temperature or top_p");
  } catch (const serve::InvalidRequest&) {
  }
  try {
    for (int32_t id : serve::parse_tokenize(body, t)) require(id >= 0 && id < vocab, "tokenize id outside the vocabulary");
  } catch (const serve::InvalidRequest&) {
  }
  try {
    (void)serve::detokenize(body, t);
  } catch (const serve::InvalidRequest&) {
  }
}

// POST /v1/completions alone, at a context the first byte picks (1 to 4096 tokens, where
// serve_request has 64): an answer within the limits or an InvalidRequest. An accepted body
// must parse again to the same request once re-serialized, and must be refused, naming
// "prompt", when a second "prompt" key is put in front of it.
void completion_request(const uint8_t* data, size_t size) {
  if (size == 0) return;
  static constexpr int64_t kContexts[] = {1, 2, 3, 17, 64, 4096};
  const int64_t context = kContexts[data[0] % std::size(kContexts)];
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  const io::Tokenizer& t = fixed_tokenizer();
  const int64_t vocab = t.vocab_size();
  serve::CompletionRequest r;
  try {
    r = serve::parse_completion(body, t, vocab, context, 777);
  } catch (const serve::InvalidRequest&) {
    return;
  }
  const int64_t prompt = static_cast<int64_t>(r.prompt.size());
  require(prompt >= 1 && prompt < context, "prompt length");
  require(r.rules.max_tokens >= 1 && r.rules.max_tokens + prompt <= context, "max_tokens past the context");
  for (int32_t id : r.prompt) require(id >= 0 && id < vocab, "prompt id outside the vocabulary");
  require(r.rules.stop.size() <= 4, "more than 4 stop strings");
  for (const std::string& stop : r.rules.stop) require(!stop.empty(), "an empty stop string");
  require(r.sampling.seed <= static_cast<uint64_t>(INT64_MAX), "seed past INT64_MAX");
  const std::string again = nlohmann::json::parse(body).dump();
  const serve::CompletionRequest r2 = serve::parse_completion(again, t, vocab, context, 777);
  require(r2.prompt == r.prompt && r2.rules.max_tokens == r.rules.max_tokens && r2.rules.stop == r.rules.stop &&
              r2.sampling.seed == r.sampling.seed && r2.stream == r.stream,
          "the re-serialized body parses to another request");
  const std::string twice = "{\"prompt\":[1]," + again.substr(1);
  try {
    (void)serve::parse_completion(twice, t, vocab, context, 777);
    require(false, "a second \"prompt\" key was accepted");
  } catch (const serve::InvalidRequest& e) {
    require(e.param == "prompt", "the duplicate \"prompt\" refused naming '" + e.param + "'");
  }
}

// Tight limits for the chat targets, so that a template that multiplies its work is refused
// within a second under ASan (about 100 us a loop step there; the server's own limits are
// larger: jinja_limits.h).
chat::RenderLimits fuzz_render_limits() {
  chat::RenderLimits limits;
  limits.max_output_bytes = size_t{1} << 20;
  limits.max_call_depth = 40;
  limits.max_nesting = 400;
  limits.max_steps = 10'000;
  return limits;
}

// The conversations every parsed template renders: a plain chat with a system prompt, and
// one with tools, thinking, a tool call and its response (the variables Qwen3's templates read).
const nlohmann::ordered_json& sample_conversations() {
  static const nlohmann::ordered_json all = nlohmann::ordered_json::parse(R"json([
    {"messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Hi"}],
     "tools": null, "kwargs": null},
    {"messages": [{"role": "user", "content": "Weather in Paris?"},
                  {"role": "assistant", "content": "", "reasoning_content": "Use the tool.",
                   "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
                  {"role": "tool", "content": "{\"temp\": 21}"},
                  {"role": "assistant", "content": "<think>\nok\n</think>\n\n21 \u00b0C."},
                  {"role": "user", "content": "Thanks \ud83d\ude00"}],
     "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather now",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
     "kwargs": {"enable_thinking": false}}
  ])json");
  return all;
}

// Any bytes as a chat template (chat/jinja_template.h): refused (a TemplateError naming the
// line) or parsed; a parsed one renders each sample conversation, or stops with a
// TemplateError (raise_exception, a limit, an error while rendering), within the limits.
void jinja_template(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  refusals_allowed([&] {
    const chat::JinjaTemplate t = chat::JinjaTemplate::parse(text, "fuzz.jinja");
    require(t.source().find('\r') == std::string::npos, "a carriage return survived parsing");
    const chat::RenderLimits limits = fuzz_render_limits();
    for (const nlohmann::ordered_json& c : sample_conversations())
      refusals_allowed([&] {
        const std::string prompt =
            chat::render_chat(t, c["messages"], c["tools"], true, c["kwargs"], "<|endoftext|>", "<|im_end|>", limits);
        require(prompt.size() <= limits.max_output_bytes, "a rendering past max_output_bytes");
      });
  });
}

// Qwen3's shape of chat template (tools in the system turn, ChatML turns, an empty think
// block when thinking is off), as tests/serve/test_server.py serves it.
const chat::JinjaTemplate& fixed_chat_template() {
  static const chat::JinjaTemplate t = chat::JinjaTemplate::parse(R"jinja({%- if tools %}
{{- '<|im_start|>system\n' }}
{%- if messages[0].role == 'system' %}{{- messages[0].content + '\n\n' }}{%- endif %}
{{- '# Tools' }}
{%- for tool in tools %}{{- '\n' + (tool | tojson) }}{%- endfor %}
{{- '<|im_end|>\n' }}
{%- endif %}
{%- for message in messages %}
{%- if not (tools and loop.first and message.role == 'system') %}
{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|im_start|>assistant\n' }}
{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\n\n</think>\n\n' }}{%- endif %}
{%- endif %}
)jinja", "fixed chat template");
  return t;
}

// One body through POST /v1/chat/completions' parser (as http_server.cpp calls it), with
// the fixed template and tokenizer: an answer within the limits or an InvalidRequest.
void chat_request(const uint8_t* data, size_t size) {
  const io::Tokenizer& t = fixed_tokenizer();
  const std::string body(reinterpret_cast<const char*>(data), size);
  const int64_t vocab = t.vocab_size(), context = 512;
  try {
    const serve::ChatRequest r =
        serve::parse_chat(body, fixed_chat_template(), serve::chat_tokens(t), t, vocab, context, 4242);
    const serve::CompletionRequest& c = r.completion;
    require(!r.prompt_text.empty(), "an empty rendered prompt");
    require(!c.prompt.empty() && static_cast<int64_t>(c.prompt.size()) < context, "prompt length");
    require(c.rules.max_tokens >= 1 && c.rules.max_tokens + static_cast<int64_t>(c.prompt.size()) <= context,
            "max_tokens past the context");
    for (int32_t id : c.prompt) require(id >= 0 && id < vocab, "prompt id outside the vocabulary");
  } catch (const serve::InvalidRequest&) {
  }
}

// A GGUF file through `import` itself (reader, config, tensor checks, vocabulary, weights),
// then with its quantised tensors kept in their blocks (io/gguf_blocks.h: what loading it
// to run does), then through the reader alone, every tensor it can convert read back (up to
// 1M values).
void gguf(const uint8_t* data, size_t size) {
  const fs::path p = write("m.gguf", data, size);
  refusals_allowed([&] { (void)io::import_gguf(p.string()); });
  refusals_allowed([&] {
    io::GgufImport g(p.string());
    const model::ParamLayout layout(g.config());
    ZeroedVector<float> params(static_cast<size_t>(layout.total()));
    model::WeightFormats formats = g.block_formats();
    std::unique_ptr<model::QuantizedWeights> blocks;
    if (!formats.tensors.empty()) blocks = std::make_unique<model::QuantizedWeights>(layout, std::move(formats));
    g.read_weights(params, blocks.get());
  });
  refusals_allowed([&] {
    io::GgufReader r(p.string());
    std::vector<float> values;
    for (const io::GgufTensorInfo& t : r.tensors())
      if (io::readable_as_f32(t.type) && t.numel <= (1 << 20)) {
        values.resize(static_cast<size_t>(t.numel));
        r.read_f32(t, values.data(), t.numel);
      }
  });
}

void report_analysis(const uint8_t* data, size_t size) {
  const fs::path p = write("analysis.json", data, size);
  refusals_allowed([&] {
    analysis::ReportOptions o;
    o.inputs = {p.string()};
    o.out_dir = (scratch() / "report").string();
    o.gnuplot = "/bin/true";  // everything but the drawing
    (void)analysis::render_report(o);
  });
}

}  // namespace

const std::vector<Target>& targets() {
  static const std::vector<Target> all{{"safetensors", safetensors},         {"config_json", config_json},
                                       {"dataset", dataset},                 {"token_ids", token_ids},
                                       {"tokenizer_model", tokenizer_model}, {"report_analysis", report_analysis},
                                       {"tokenizer_json", tokenizer_json},   {"tokenizer_json_text", tokenizer_json_text},
                                       {"serve_request", serve_request},     {"hf_config_json", hf_config_json},
                                       {"completion_request", completion_request}, {"gguf", gguf},
                                       {"jinja_template", jinja_template},   {"chat_request", chat_request}};
  return all;
}

Entry find_target(const std::string& name) {
  for (const Target& t : targets())
    if (name == t.name) return t.entry;
  return nullptr;
}

}  // namespace gatedlm::fuzz
