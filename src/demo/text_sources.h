#pragma once
// The demo's texts: the training corpus (the user's --corpus, else the State of the Union
// from npm) with its fingerprint, and the held-out domain (--heldout, else Moby-Dick from
// npm; none for synthetic presets or --heldout none, with a note saying why).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/stage_cache.h"
#include "demo/demo_options.h"
#include "demo/preset.h"

namespace gatedlm::demo {

struct TextSources {
  std::vector<std::string> corpus_inputs;  // files or directories, as the tokenizer and data stages take them
  nlohmann::json corpus_info;              // results.json's "corpus": source, package, files, bytes, sha256
  std::string corpus_sha;                  // over the files' names and contents
  std::string heldout_path, heldout_name;  // empty: no held-out evaluation
  nlohmann::json heldout_info;             // null without one
  std::string heldout_note;                // why there is none
  std::string heldout_sha;
};

// Fetches (or reuses from the cache) what the options do not give. Throws when the corpus
// cannot be had, saying how to give one; a missing held-out text only leaves a note.
TextSources gather_texts(const DemoOptions& options, const Preset& preset, const StageLog& log);

}  // namespace gatedlm::demo
