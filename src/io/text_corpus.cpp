#include "io/text_corpus.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <system_error>

#include "core/error.h"

namespace gatedlm::io {
namespace fs = std::filesystem;

namespace {

bool looks_binary(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  char block[65536];
  in.read(block, sizeof block);
  return std::memchr(block, '\0', static_cast<size_t>(in.gcount())) != nullptr;
}

bool hidden(const fs::path& path) {
  const std::string name = path.filename().string();
  return !name.empty() && name[0] == '.';
}

}  // namespace

std::vector<std::string> collect_text_files(const std::vector<std::string>& inputs) {
  std::vector<std::string> files;
  for (const std::string& input : inputs) {
    std::error_code ec;
    const fs::file_status status = fs::status(input, ec);
    if (ec && ec != std::errc::no_such_file_or_directory) fail(input, ": cannot read (", ec.message(), ")");
    if (!fs::exists(status)) fail(input, ": no such file or directory");
    if (fs::is_regular_file(status)) {
      files.push_back(input);
      continue;
    }
    if (!fs::is_directory(status)) fail(input, ": not a regular file or directory");
    std::vector<fs::path> found;
    fs::recursive_directory_iterator it(input, fs::directory_options::follow_directory_symlink, ec), end;
    if (ec) fail(input, ": cannot read directory (", ec.message(), ")");
    // Directories already walked (by canonical path): a symlink back up the tree is skipped
    // instead of being followed until the path is too long.
    std::set<fs::path> walked{fs::canonical(input, ec)};
    for (; it != end; it.increment(ec)) {
      if (ec) fail(input, ": cannot read directory (", ec.message(), ")");
      std::error_code entry_ec;
      const bool is_dir = it->is_directory(entry_ec);
      if (hidden(it->path())) {
        if (is_dir) it.disable_recursion_pending();
        continue;
      }
      if (is_dir) {
        const fs::path real = fs::canonical(it->path(), entry_ec);
        if (entry_ec || !walked.insert(real).second) {
          std::fprintf(stderr, "gatedlm: skipping %s (a symlink loop back to %s)\n", it->path().string().c_str(),
                       real.string().c_str());
          it.disable_recursion_pending();
        }
        continue;
      }
      if (it->is_symlink(entry_ec) && !fs::exists(it->path(), entry_ec)) {
        std::fprintf(stderr, "gatedlm: skipping %s (a broken or looping symlink)\n", it->path().string().c_str());
        continue;
      }
      if (it->is_regular_file(entry_ec)) found.push_back(it->path());
    }
    if (ec) fail(input, ": cannot read directory (", ec.message(), ")");
    std::sort(found.begin(), found.end());
    size_t taken = 0;
    for (const fs::path& path : found) {
      if (looks_binary(path)) {
        std::fprintf(stderr, "gatedlm: skipping %s (binary: it holds NUL bytes)\n", path.string().c_str());
        continue;
      }
      files.push_back(path.string());
      ++taken;
    }
    if (taken == 0) fail(input, ": directory holds no text files");
  }
  return files;
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot read (", std::strerror(errno), ")");
  std::string text;
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (!ec) text.reserve(static_cast<size_t>(size));
  char block[1 << 16];
  while (in) {
    in.read(block, sizeof block);
    text.append(block, static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) fail(path, ": read error");
  return text;
}

int64_t find_invalid_utf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      cp = c & 0x07;
    } else {
      return static_cast<int64_t>(i);
    }
    if (i + len > n) return static_cast<int64_t>(i);
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return static_cast<int64_t>(i);
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    const bool overlong = (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
    if (overlong || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return static_cast<int64_t>(i);
    i += len;
  }
  return -1;
}

size_t utf8_boundary_at_or_before(std::string_view text, size_t pos) {
  pos = std::min(pos, text.size());
  size_t p = pos;
  // A character is at most 4 bytes: look back over at most 3 continuation bytes.
  while (p > 0 && pos - p < 3 && p < text.size() && (static_cast<unsigned char>(text[p]) & 0xC0) == 0x80) --p;
  if (p < text.size() && (static_cast<unsigned char>(text[p]) & 0xC0) == 0x80) return pos;  // not UTF-8 here
  return p;
}

std::vector<std::string_view> split_text(std::string_view text, size_t max_bytes) {
  std::vector<std::string_view> pieces;
  max_bytes = std::max<size_t>(max_bytes, 4);
  size_t pos = 0;
  while (text.size() - pos > max_bytes) {
    const std::string_view window = text.substr(pos, max_bytes);
    size_t cut = window.rfind('\n');
    if (cut != std::string_view::npos) {
      cut += 1;  // keep the newline with the text before it
    } else {
      cut = window.rfind(' ');
      if (cut == std::string_view::npos || cut == 0) {  // no space: a character boundary
        cut = utf8_boundary_at_or_before(text, pos + max_bytes) - pos;
        if (cut == 0) cut = max_bytes;
      }
    }
    pieces.push_back(text.substr(pos, cut));
    pos += cut;
  }
  if (pos < text.size()) pieces.push_back(text.substr(pos));
  return pieces;
}

size_t validation_cut(std::string_view text, double val_fraction) {
  const size_t n = text.size();
  if (!(val_fraction > 0)) return n;
  const auto tail = static_cast<size_t>(std::llround(static_cast<double>(n) * val_fraction));
  if (tail == 0) return n;
  const size_t nominal = n - std::min(tail, n);
  const size_t window = std::min<size_t>(64 * 1024, tail / 2);
  // The candidates: just after the last newline before the nominal cut and just after
  // the first newline at or after it; the nearer one inside the window wins.
  size_t best = std::string_view::npos, best_distance = window + 1;
  if (nominal > 0) {
    const size_t before = text.rfind('\n', nominal - 1);
    if (before != std::string_view::npos && nominal - (before + 1) < best_distance) {
      best = before + 1;
      best_distance = nominal - best;
    }
  }
  const size_t after = text.find('\n', nominal);
  if (after != std::string_view::npos && after + 1 < n && after + 1 - nominal < best_distance) {
    best = after + 1;
  }
  if (best != std::string_view::npos) return best;
  return utf8_boundary_at_or_before(text, nominal);
}

}  // namespace gatedlm::io
