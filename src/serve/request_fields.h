#pragma once
// The checks every JSON body of the server goes through, shared by /v1/completions and
// /v1/chat/completions (completion_request.h, chat_request.h): the body parsed as an object
// of known keys (no key twice, bounded nesting), numbers in range, text through the
// tokenizer, and the generation fields both endpoints take. Every problem is an
// InvalidRequest naming the field.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.h"
#include "infer/generation.h"
#include "infer/sampler.h"
#include "io/tokenizer.h"

namespace gatedlm::serve {

struct InvalidRequest : std::runtime_error {
  InvalidRequest(std::string param_, const std::string& message) : std::runtime_error(message), param(std::move(param_)) {}
  std::string param;  // the offending field ("" for the body as a whole)
};

struct CompletionRequest {
  std::vector<int32_t> prompt;  // BOS + the prompt's tokens (or the ids given)
  infer::SamplingParams sampling;
  infer::StopRules rules;
  bool stream = false;
};

// The body as a JSON object whose keys are all in `known`.
nlohmann::json parse_object(const std::string& body, const std::set<std::string>& known);
// A number field within [lo, hi] (lo open when told), or the default when absent or null.
double number(const nlohmann::json& j, const std::string& key, double fallback, double lo, double hi,
              bool lo_open = false);
// An integer field within [lo, hi], or the default when absent or null.
int64_t integer(const nlohmann::json& j, const std::string& key, int64_t fallback, int64_t lo, int64_t hi);
// A list of token ids below vocab.
std::vector<int32_t> token_list(const nlohmann::json& v, const std::string& key, int64_t vocab);
// The tokenizer's refusal (text it cannot encode, an id it cannot decode) as a 400 about
// `param`, without the server's tokenizer path that the message starts with.
InvalidRequest tokenizer_refusal(const Error& e, const io::Tokenizer& tokenizer, const std::string& param);
// text's ids; a refusal is an InvalidRequest about `param`.
std::vector<int32_t> encode(const io::Tokenizer& tokenizer, const std::string& text, const std::string& param);

// The fields both endpoints take once r.prompt is known: model, user, n (1), max_tokens
// (and chat's max_completion_tokens, which wins), ignore_eos, temperature, top_p, top_k,
// min_p, repetition_penalty, seed, stop, stream. default_max_tokens: when the body gives
// none (capped by the room the prompt leaves in the context).
struct GenerationLimits {
  int64_t vocab;
  int64_t context;
  uint64_t default_seed;
  int64_t default_max_tokens;
  std::string prompt_field;  // what a prompt too long for the context is blamed on: "prompt", "messages"
};
void parse_generation_fields(const nlohmann::json& j, const io::Tokenizer& tokenizer, const GenerationLimits& limits,
                             CompletionRequest& r);

}  // namespace gatedlm::serve
