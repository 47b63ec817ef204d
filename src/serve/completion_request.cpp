#include "serve/completion_request.h"

#include <vector>

#include "core/error.h"

namespace gatedlm::serve {

using nlohmann::json;

CompletionRequest parse_completion(const std::string& body, const io::Tokenizer& tokenizer, int64_t vocab,
                                   int64_t context, uint64_t default_seed) {
  const json j = parse_object(body, {"model", "prompt", "max_tokens", "temperature", "top_p", "top_k", "min_p",
                                     "repetition_penalty", "seed", "stop", "stream", "n", "user", "ignore_eos"});
  CompletionRequest r;
  if (!j.contains("prompt")) throw InvalidRequest("prompt", "'prompt' is required");
  const json& p = j["prompt"];
  if (p.is_string()) {
    r.prompt.push_back(tokenizer.bos_id());
    for (int32_t t : encode(tokenizer, p.get<std::string>(), "prompt")) r.prompt.push_back(t);
  } else if (p.is_array()) {
    r.prompt = token_list(p, "prompt", vocab);
    if (r.prompt.empty()) throw InvalidRequest("prompt", "'prompt' holds no tokens");
  } else {
    throw InvalidRequest("prompt", "'prompt' must be a string or a list of token ids");
  }
  parse_generation_fields(j, tokenizer, {vocab, context, default_seed, /*default_max_tokens=*/16, "prompt"}, r);
  return r;
}

std::vector<int32_t> parse_tokenize(const std::string& body, const io::Tokenizer& tokenizer) {
  const json j = parse_object(body, {"content", "add_bos"});
  if (!j.contains("content") || !j["content"].is_string()) throw InvalidRequest("content", "'content' must be a string");
  if (j.contains("add_bos") && !j["add_bos"].is_boolean()) throw InvalidRequest("add_bos", "'add_bos' must be true or false");
  std::vector<int32_t> ids;
  if (j.value("add_bos", false)) ids.push_back(tokenizer.bos_id());
  for (int32_t t : encode(tokenizer, j["content"].get<std::string>(), "content")) ids.push_back(t);
  return ids;
}

std::vector<int32_t> parse_detokenize(const std::string& body, int64_t vocab) {
  const json j = parse_object(body, {"tokens"});
  if (!j.contains("tokens")) throw InvalidRequest("tokens", "'tokens' is required");
  return token_list(j["tokens"], "tokens", vocab);
}

std::string detokenize(const std::string& body, const io::Tokenizer& tokenizer) {
  const std::vector<int32_t> ids = parse_detokenize(body, tokenizer.vocab_size());
  try {
    return tokenizer.decode(ids);
  } catch (const Error& e) {
    throw tokenizer_refusal(e, tokenizer, "tokens");
  }
}

}  // namespace gatedlm::serve
