#include "io/token_ids.h"

#include <charconv>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace gatedlm::io {

std::vector<std::vector<int32_t>> read_token_ids(const std::string& path, const TokenIdLimits& limits) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail(path, ": is a directory, expected a token-id file");
  std::ifstream in(path);
  if (!in) fail(path, ": cannot open the token-id file");
  std::vector<std::vector<int32_t>> sequences;
  std::string line;
  for (int64_t line_no = 1; std::getline(in, line); ++line_no) {
    std::vector<int32_t> seq;
    size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
      if (i == line.size()) break;
      size_t j = i;
      while (j < line.size() && !std::isspace(static_cast<unsigned char>(line[j]))) ++j;
      int64_t value = 0;
      auto [end, ec] = std::from_chars(line.data() + i, line.data() + j, value);
      if (ec != std::errc() || end != line.data() + j || value < 0 || value > INT32_MAX)
        fail(path, ":", line_no, ": \"", line.substr(i, j - i), "\" is not a token id (a non-negative integer)");
      if (limits.vocab_size > 0 && value >= limits.vocab_size)
        fail(path, ":", line_no, ": token id ", value, " is outside the model's vocabulary (0..", limits.vocab_size - 1,
             ")");
      if (limits.max_tokens_per_line > 0 && static_cast<int64_t>(seq.size()) >= limits.max_tokens_per_line)
        fail(path, ":", line_no, ": more than ", limits.max_tokens_per_line, " token ids on the line (the model's ",
             limits.length_limit_name, "); split it into shorter sequences");
      seq.push_back(static_cast<int32_t>(value));
      i = j;
    }
    if (!seq.empty() && static_cast<int64_t>(seq.size()) < limits.min_tokens_per_line)
      fail(path, ":", line_no, ": ", seq.size(), " token id", seq.size() == 1 ? "" : "s", ", at least ",
           limits.min_tokens_per_line, " are needed (the first token is only context; each later one is scored)");
    if (!seq.empty()) sequences.push_back(std::move(seq));
  }
  if (sequences.empty()) fail(path, ": no token ids in the file");
  return sequences;
}

}  // namespace gatedlm::io
