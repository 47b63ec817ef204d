#pragma once
// Token-id text files: whitespace-separated integer ids, one sequence per line; blank
// lines are skipped.
#include <cstdint>
#include <string>
#include <vector>

namespace gatedlm::io {

std::vector<std::vector<int32_t>> read_token_ids(const std::string& path);

}  // namespace gatedlm::io
