#include "io/model_tokenizer.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_file.h"
#include "io/token_dataset.h"

namespace gatedlm::io {

namespace fs = std::filesystem;

namespace {

// The tokenizer recorded for a run directory's data, or null.
std::unique_ptr<Tokenizer> from_run(const fs::path& run, std::string& source) {
  const fs::path info = run / "run.json";
  if (!fs::is_regular_file(info)) return nullptr;
  const nlohmann::json j = read_json_file(info.string(), "run description");
  if (!j.is_object() || !j.contains("data") || !j["data"].is_string()) return nullptr;
  const std::string data = j["data"].get<std::string>();
  if (!fs::exists(fs::path(data) / "manifest.json")) return nullptr;
  source = data + " (the run's data, from " + info.string() + ")";
  return TokenDataset::open(data).tokenizer();
}

}  // namespace

std::unique_ptr<Tokenizer> tokenizer_beside(const std::string& dir, std::string& source) {
  for (const char* name : {"tokenizer.model", "tokenizer.json"}) {
    const fs::path file = fs::path(dir) / name;
    if (!fs::is_regular_file(file)) continue;
    source = file.string();
    return Tokenizer::load(source);
  }
  return nullptr;
}

std::unique_ptr<Tokenizer> recorded_tokenizer(const std::string& checkpoint, const std::string& checkpoint_dir,
                                              std::string& source) {
  const fs::path ck_dir = fs::absolute(checkpoint_dir);
  const fs::path given = fs::absolute(checkpoint);
  // The run: the path given when it holds run.json, else two levels above the checkpoint.
  const fs::path run = fs::exists(given / "run.json") ? given : ck_dir.parent_path().parent_path();
  if (std::unique_ptr<Tokenizer> t = from_run(run, source)) return t;
  for (const fs::path& dir : {ck_dir, run, run.parent_path().parent_path()})
    if (std::unique_ptr<Tokenizer> t = tokenizer_beside(dir.string(), source)) return t;
  return nullptr;
}

void check_tokenizer_fits(const Tokenizer& tokenizer, const std::string& source, int64_t vocab_size,
                          const std::string& checkpoint) {
  if (tokenizer.vocab_size() > vocab_size)
    fail(source, ": the tokenizer has ", tokenizer.vocab_size(), " ids, more than the model's vocab_size ", vocab_size,
         " (", checkpoint, ")");
}

}  // namespace gatedlm::io
