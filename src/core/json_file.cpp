#include "core/json_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "core/error.h"

namespace gatedlm {

using nlohmann::json;

namespace {
constexpr int kMaxJsonDepth = 256;
}  // namespace

json parse_json_strict(std::string_view text, const std::string& source) {
  // One set of keys per open object (depth-first), to catch a key given twice.
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) {
    // No file of ours nests more than a few levels; code that recurses once per level
    // (json::dump in messages) would overflow the stack on a file of a million '['.
    if (depth > kMaxJsonDepth) fail(source, ": nests arrays or objects deeper than ", kMaxJsonDepth, " levels");
    switch (event) {
      case json::parse_event_t::object_start: open_objects.emplace_back(); break;
      case json::parse_event_t::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        break;
      case json::parse_event_t::key:
        if (!open_objects.empty() && !open_objects.back().insert(parsed.get<std::string>()).second &&
            duplicate.empty())
          duplicate = parsed.get<std::string>();
        break;
      default: break;
    }
    return true;
  };
  json j;
  try {
    j = json::parse(text.begin(), text.end(), callback);
  } catch (const json::exception& e) {
    // parse_error, and out_of_range 406 for a number that does not fit a double (1e400).
    fail(source, ": not valid JSON (", e.what(), ")");
  }
  if (!duplicate.empty()) fail(source, ": the key \"", duplicate, "\" appears twice in one object");
  return j;
}

namespace {

// Opens `path` for reading, refusing a missing file or a directory with a message naming it.
std::ifstream open_for_reading(const std::string& path, const std::string& what) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) fail(path, ": no such ", what);
  if (std::filesystem::is_directory(status)) fail(path, ": is a directory, expected the ", what);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot open the ", what, " (", std::strerror(errno), ")");
  return in;
}

}  // namespace

std::string read_whole_file(const std::string& path, const std::string& what) {
  std::ifstream in = open_for_reading(path, what);
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) fail(path, ": read error in the ", what);
  return s.str();
}

std::string read_file_at_most(const std::string& path, size_t max_bytes, const std::string& what) {
  std::ifstream in = open_for_reading(path, what);
  std::string out;
  char buffer[1 << 16];
  while (in.read(buffer, sizeof(buffer)) || in.gcount() > 0) {
    out.append(buffer, static_cast<size_t>(in.gcount()));
    if (out.size() > max_bytes) fail(path, ": the ", what, " holds more than ", max_bytes, " bytes, the limit");
  }
  if (in.bad()) fail(path, ": read error in the ", what);
  return out;
}

json read_json_file(const std::string& path, const std::string& what) {
  return parse_json_strict(read_whole_file(path, what), path);
}

}  // namespace gatedlm
