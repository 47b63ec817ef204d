#pragma once
// The demo's data stages: the tokenizer (SentencePiece BPE trained on the corpus, or bytes
// for a synthetic preset that asks for them) and the token shards (the corpus tokenized, or
// synthetic data generated from it). Each is redone only when its inputs changed:
//   DIR/tokenizer.model + DIR/tokenizer.key,  DIR/data/ + DIR/data.key
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "core/stage_cache.h"
#include "demo/preset.h"
#include "demo/text_sources.h"

namespace gatedlm::demo {

struct PreparedData {
  bool byte_tokenizer = false;
  std::string tokenizer_path;  // DIR/tokenizer.model (unused with bytes)
  std::string data_dir;        // DIR/data
  std::string data_key;        // the shards' inputs: the runs' keys include it
  nlohmann::json synthetic;    // the manifest's "synthetic" record (null for text)
};

// `fresh`: redo both stages whatever their stamps say.
PreparedData prepare_data(const std::filesystem::path& out, const Preset& preset, const TextSources& texts, bool fresh,
                          const StageLog& log);

}  // namespace gatedlm::demo
