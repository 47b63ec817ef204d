#pragma once
// Token-id text files: whitespace-separated integer ids, one sequence per line; blank
// lines are skipped.
#include <cstdint>
#include <string>
#include <vector>

namespace gatedlm::io {

// Limits checked while reading (0 = none), each refused naming the file, the line and the
// limit: a line longer than the model's max_seq_len is refused before it is scored.
struct TokenIdLimits {
  int64_t vocab_size = 0;         // ids must be below it
  int64_t max_tokens_per_line = 0;
  int64_t min_tokens_per_line = 1;
  std::string length_limit_name = "max_seq_len";  // named in the message for max_tokens_per_line
};

std::vector<std::vector<int32_t>> read_token_ids(const std::string& path, const TokenIdLimits& limits = {});

}  // namespace gatedlm::io
