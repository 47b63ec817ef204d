#pragma once
// The JSON bodies of the server's POST endpoints, parsed and checked. Every problem is an
// InvalidRequest naming the field (param) it is about, for the 400 answer; nothing else
// is thrown (text the tokenizer refuses is an InvalidRequest about the field that held
// it). Fuzzed without sockets by tests/fuzz (target serve_request).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

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

// POST /v1/completions. vocab: the model's; context: tokens per sequence.
CompletionRequest parse_completion(const std::string& body, const io::Tokenizer& tokenizer, int64_t vocab,
                                   int64_t context, uint64_t default_seed);
// POST /tokenize {content, add_bos?}: the ids.
std::vector<int32_t> parse_tokenize(const std::string& body, const io::Tokenizer& tokenizer);
// POST /detokenize {tokens}: the ids (checked against vocab).
std::vector<int32_t> parse_detokenize(const std::string& body, int64_t vocab);
// POST /detokenize's answer: the ids of the body decoded (an id the tokenizer has no text
// for, a hole in a tokenizer.json vocabulary, is an InvalidRequest too).
std::string detokenize(const std::string& body, const io::Tokenizer& tokenizer);

}  // namespace gatedlm::serve
