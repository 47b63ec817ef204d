#include "core/stage_cache.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_file.h"
#include "core/sha256.h"

namespace gatedlm {

namespace fs = std::filesystem;

StageLog::StageLog(std::string tool) : tool_(std::move(tool)), start_(std::chrono::steady_clock::now()) {}

void StageLog::restart() { start_ = std::chrono::steady_clock::now(); }

double StageLog::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void StageLog::say(const std::string& message) const {
  const int s = static_cast<int>(elapsed_s());
  std::fprintf(stderr, "[%s %02d:%02d] %s\n", tool_.c_str(), s / 60, s % 60, message.c_str());
  std::fflush(stderr);
}

void StageLog::say(const std::string& stage, const std::string& message) const { say(stage + ": " + message); }

std::string stage_key(const nlohmann::json& inputs) { return sha256_hex(inputs.dump()); }

std::string read_stamp(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

bool stamp_matches(const std::string& path, const std::string& key) { return !key.empty() && read_stamp(path) == key; }

void write_stamp(const std::string& path, const std::string& key) { write_file_atomic(path, key + "\n"); }

void remove_stamp(const std::string& path) {
  std::error_code ec;
  fs::remove(path, ec);
  if (ec) fail(path, ": cannot remove the stage's stamp (", ec.message(), ")");
}

nlohmann::json read_json_or_null(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return nullptr;
  try {
    return read_json_file(path, "stage output");
  } catch (const Error&) {
    return nullptr;
  }
}

void write_if_changed(const std::string& path, const std::string& text) {
  std::ifstream in(path, std::ios::binary);
  if (in && std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()) == text) return;
  write_file_atomic(path, text);
}

}  // namespace gatedlm
