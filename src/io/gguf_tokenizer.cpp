#include "io/gguf_tokenizer.h"

#include <nlohmann/json.hpp>
#include <unordered_map>

#include "core/error.h"
#include "io/text_corpus.h"
#include "io/tokenizer_json.h"

namespace gatedlm::io {

namespace {

using nlohmann::json;  // std::map objects: a 150k-token vocab inserts in O(log n) each

json pre_tokenizer_json(const LlamaPreTokenizer& p) {
  return {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"}, {"pattern", {{"Regex", p.regex}}}, {"behavior", "Isolated"}, {"invert", false}},
            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}}}};
}

// gatedlm's byte tokenizer as `export --format gguf` writes it: the 256 byte symbols,
// <|bos|>, <|eos|>, no merges, the rest unused padding.
bool is_byte_vocabulary(const std::vector<std::string>& tokens, const std::vector<int64_t>& types, size_t merges) {
  if (merges != 0 || tokens.size() < 258 || tokens[256] != "<|bos|>" || tokens[257] != "<|eos|>") return false;
  for (int b = 0; b < 256; ++b)
    if (tokens[b] != byte_level_symbol(static_cast<unsigned char>(b))) return false;
  if (types.empty()) return tokens.size() == 258;
  for (size_t i = 0; i < types.size(); ++i)
    if (types[i] != (i < 256 ? 1 : i < 258 ? 3 : 5)) return false;
  return true;
}

void require_utf8(const GgufReader& f, const char* key, int64_t index, const std::string& s) {
  if (find_invalid_utf8(s) >= 0) fail(f.path(), ": key ", key, ": entry ", index, " is not valid UTF-8");
}

// tokens and types -> model.vocab and added_tokens.
void add_tokens(const GgufReader& f, const std::vector<std::string>& tokens, const std::vector<int64_t>& types,
                json& vocab, json& added) {
  std::unordered_map<std::string, size_t> seen;
  for (size_t id = 0; id < tokens.size(); ++id) {
    const std::string& t = tokens[id];
    const int64_t type = types.empty() ? 1 : types[id];
    if (type == 5) continue;
    require_utf8(f, "tokenizer.ggml.tokens", static_cast<int64_t>(id), t);
    if (t.empty()) fail(f.path(), ": key tokenizer.ggml.tokens: token ", id, " is empty");
    if (type == 6)
      fail(f.path(), ": key tokenizer.ggml.token_type: token ", id, " is a byte token (type 6), which byte-level BPE has not");
    if (type < 1 || type > 4) fail(f.path(), ": key tokenizer.ggml.token_type: token ", id, " has unknown type ", type);
    if (const auto [it, fresh] = seen.emplace(t, id); !fresh)
      fail(f.path(), ": key tokenizer.ggml.tokens: tokens ", it->second, " and ", id, " are both \"", t, "\"");
    if (type <= 2) {
      vocab[t] = id;
    } else {
      added.push_back({{"id", id}, {"content", t}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                       {"normalized", false}, {"special", type == 3}});
    }
  }
}

json merges_json(const GgufReader& f) {
  json out = json::array();
  if (!f.has("tokenizer.ggml.merges")) return out;
  const std::vector<std::string>& merges = f.get_strings("tokenizer.ggml.merges");
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string& m = merges[i];
    require_utf8(f, "tokenizer.ggml.merges", static_cast<int64_t>(i), m);
    const size_t space = m.find(' ', 1);  // as llama.cpp splits them
    if (space == std::string::npos || space + 1 == m.size())
      fail(f.path(), ": key tokenizer.ggml.merges: merge ", i, " \"", m, "\" is not \"left right\"");
    out.push_back({m.substr(0, space), m.substr(space + 1)});
  }
  return out;
}

// Loads `text` as a tokenizer.json (every check load_tokenizer_json makes), in memory.
int64_t loaded_vocab_size(const GgufReader& f, const std::string& text) {
  try {
    return tokenizer_json_from_text(text, f.path() + " (tokenizer.ggml.*)")->vocab_size();
  } catch (const Error& e) {
    fail(f.path(), ": its vocabulary (tokenizer.ggml.*) does not load as a byte-level BPE tokenizer.json: ", e.what());
  }
}

}  // namespace

GgufVocabulary gguf_vocabulary(const GgufReader& f, int64_t model_vocab) {
  if (!f.has("tokenizer.ggml.tokens")) return {"", "none (the file has no tokenizer.ggml.tokens)"};
  const std::string model = f.get_string("tokenizer.ggml.model");
  if (model != "gpt2")
    fail(f.path(), ": key tokenizer.ggml.model is \"", model, "\"; gatedlm imports byte-level BPE vocabularies (\"gpt2\")");
  const std::vector<std::string>& tokens = f.get_strings("tokenizer.ggml.tokens");
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n > model_vocab)
    fail(f.path(), ": key tokenizer.ggml.tokens holds ", n, " tokens, more than the model's vocab_size ", model_vocab);
  std::vector<int64_t> types;
  if (f.has("tokenizer.ggml.token_type")) {
    types = f.get_ints("tokenizer.ggml.token_type");
    if (static_cast<int64_t>(types.size()) != n)
      fail(f.path(), ": key tokenizer.ggml.token_type holds ", types.size(), " types for ", n, " tokens");
  }
  for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"})
    if (f.has(key)) (void)f.get_int(key, 0, n - 1);
  const size_t n_merges = f.has("tokenizer.ggml.merges") ? f.get_strings("tokenizer.ggml.merges").size() : 0;
  if (is_byte_vocabulary(tokens, types, n_merges)) return {"", "gatedlm's byte tokenizer (no tokenizer.json needed)", true};

  const LlamaPreTokenizer& pre = llama_pre_tokenizer_named(
      f.has("tokenizer.ggml.pre") ? f.get_string("tokenizer.ggml.pre") : "", f.path());
  json vocab = json::object(), added = json::array();
  add_tokens(f, tokens, types, vocab, added);
  json j{{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", added}};
  j["normalizer"] = pre.nfc ? json{{"type", "NFC"}} : json(nullptr);
  j["pre_tokenizer"] = pre_tokenizer_json(pre);
  j["post_processor"] = nullptr;
  j["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  j["model"] = {{"type", "BPE"},        {"dropout", nullptr},      {"unk_token", nullptr},
                {"fuse_unk", false},    {"byte_fallback", false},  {"ignore_merges", pre.ignore_merges},
                {"vocab", vocab},       {"merges", merges_json(f)}};
  GgufVocabulary out{j.dump(1) + "\n", ""};
  const int64_t ids = loaded_vocab_size(f, out.tokenizer_json);
  out.description = cat("byte-level BPE, ", ids, " ids, ", j["model"]["merges"].size(), " merges, pre-tokenizer ", pre.name);
  return out;
}

namespace {

// The regexes as Hugging Face's tokenizer.json files write them (llama.cpp's llama-vocab.cpp
// quotes them as "original regex from tokenizer.json" beside its own spellings).
constexpr const char* kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen3.5 / Qwen3.6: Qwen2's with the letters' combining marks (\p{M}) kept with them.
constexpr const char* kQwen35Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Llama 3 (and DBRX's, Smaug's): digits in runs of at most three.
constexpr const char* kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr LlamaPreTokenizer kPreTokenizers[] = {
    {"qwen2", "deepseek-r1-qwen", kQwen2Regex, true, false},
    {"qwen35", "", kQwen35Regex, true, false},
    {"llama3", "llama-v3 llama-bpe", kLlama3Regex, false, true},
    {"dbrx", "smaug-bpe", kLlama3Regex, false, false},
    {"gpt-2", "", kGpt2SplitRegex, false, false},
};

bool is_named(const LlamaPreTokenizer& p, const std::string& name) {
  if (name == p.name) return true;
  const std::string aliases = std::string(" ") + p.aliases + " ";
  return !name.empty() && aliases.find(" " + name + " ") != std::string::npos;
}

std::string known_names() {
  std::string known;
  for (const LlamaPreTokenizer& p : kPreTokenizers)
    known += (known.empty() ? "" : ", ") + std::string(p.name) + (*p.aliases ? cat(" (", p.aliases, ")") : "");
  return known;
}

}  // namespace

std::span<const LlamaPreTokenizer> llama_pre_tokenizers() { return kPreTokenizers; }

const LlamaPreTokenizer& llama_pre_tokenizer_named(const std::string& name, const std::string& source) {
  for (const LlamaPreTokenizer& p : kPreTokenizers)
    if (is_named(p, name)) return p;
  if (name.empty() || name == "default")
    fail(source, ": key tokenizer.ggml.pre is ", name.empty() ? "missing" : "\"default\"",
         ", which llama.cpp splits with its \"default\" pre-tokenizer: four regexes in turn, which no tokenizer.json "
         "with one Split regex expresses (gatedlm knows ", known_names(), ")");
  fail(source, ": key tokenizer.ggml.pre is \"", name, "\", a pre-tokenizer gatedlm does not know (", known_names(), ")");
}

std::string llama_pre_tokenizer_name(const TokenizerJsonVocabulary& v, const std::string& source) {
  if (v.split_regex.empty()) return "qwen2";
  for (const LlamaPreTokenizer& p : kPreTokenizers)
    if (v.split_regex == p.regex && v.ignore_merges == p.ignore_merges) return p.name;
  fail(source, ": llama.cpp has no pre-tokenizer (tokenizer.ggml.pre) that splits text as this tokenizer does: its "
       "regex /", v.split_regex.size() > 200 ? v.split_regex.substr(0, 200) + "..." : v.split_regex, "/",
       v.ignore_merges ? " with ignore_merges" : "", " is none of those gatedlm maps to "
       "llama.cpp's names (", known_names(), ")");
}

}  // namespace gatedlm::io
