#pragma once
// JSON read from files and untrusted text, strictly: every failure (missing file, a
// directory in its place, a read error, bad syntax, a number out of range such as 1e400,
// a key given twice in one object, nesting deeper than 256 levels) becomes a gatedlm::Error
// naming the file. nlohmann::json
// alone would keep the last of two duplicate keys silently.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace gatedlm {

// Parses `text`; `source` names it in messages (usually the file path).
nlohmann::json parse_json_strict(std::string_view text, const std::string& source);
// Reads and parses a whole file; `what` describes it in messages ("the model config").
nlohmann::json read_json_file(const std::string& path, const std::string& what = "JSON file");
// A whole file's bytes; throws naming the file when it is missing, a directory or unreadable.
std::string read_whole_file(const std::string& path, const std::string& what = "file");
// The same, refusing (naming the file and the limit) one longer than max_bytes: reads at most
// max_bytes + 1 bytes, so /dev/zero or an endless pipe costs no more.
std::string read_file_at_most(const std::string& path, size_t max_bytes, const std::string& what);

}  // namespace gatedlm
