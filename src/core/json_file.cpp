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

// The first key given twice in one object, or "" (the slow pass: a set of keys per open
// object; run only once the fast pass has seen an object lose a key).
std::string first_duplicate_key(std::string_view text) {
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  auto callback = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) open_objects.emplace_back();
    if (event == json::parse_event_t::object_end && !open_objects.empty()) open_objects.pop_back();
    if (event == json::parse_event_t::key && !open_objects.empty() &&
        !open_objects.back().insert(parsed.get<std::string>()).second && duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  // Walked for the callback only (a (void) cast does not silence GCC's warn_unused_result).
  [[maybe_unused]] const json walked = json::parse(text.begin(), text.end(), callback);
  return duplicate;
}

}  // namespace

json parse_json_strict(std::string_view text, const std::string& source) {
  // The keys seen in each open object (depth-first): an object that ends with fewer
  // members than keys had a key given twice (nlohmann keeps the last silently). Counting
  // instead of keeping a set of the keys makes a 151k-token tokenizer.json load in a
  // fraction of the time; the slow pass names the key only when there is one.
  std::vector<size_t> keys_seen;
  bool lost_a_key = false;
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) {
    // No file of ours nests more than a few levels; code that recurses once per level
    // (json::dump in messages) would overflow the stack on a file of a million '['.
    if (depth > kMaxJsonDepth) fail(source, ": nests arrays or objects deeper than ", kMaxJsonDepth, " levels");
    switch (event) {
      case json::parse_event_t::object_start: keys_seen.push_back(0); break;
      case json::parse_event_t::key:
        if (!keys_seen.empty()) ++keys_seen.back();
        break;
      case json::parse_event_t::object_end:
        if (!keys_seen.empty()) {
          lost_a_key |= parsed.size() != keys_seen.back();
          keys_seen.pop_back();
        }
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
  if (lost_a_key) fail(source, ": the key \"", first_duplicate_key(text), "\" appears twice in one object");
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
