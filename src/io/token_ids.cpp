#include "io/token_ids.h"

#include <charconv>
#include <fstream>

#include "core/error.h"

namespace gatedlm::io {

std::vector<std::vector<int32_t>> read_token_ids(const std::string& path) {
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
      seq.push_back(static_cast<int32_t>(value));
      i = j;
    }
    if (!seq.empty()) sequences.push_back(std::move(seq));
  }
  if (sequences.empty()) fail(path, ": no token ids in the file");
  return sequences;
}

}  // namespace gatedlm::io
