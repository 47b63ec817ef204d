#pragma once
// The JSON bodies of the server's POST endpoints, parsed and checked. Every problem is an
// InvalidRequest naming the field (param) it is about, for the 400 answer; nothing else
// is thrown (text the tokenizer refuses is an InvalidRequest about the field that held
// it). Fuzzed without sockets by tests/fuzz (target serve_request).
#include <cstdint>
#include <string>
#include <vector>

#include "io/tokenizer.h"
#include "serve/request_fields.h"

namespace gatedlm::serve {

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
