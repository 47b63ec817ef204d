#include "infer/model_files.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/checkpoint.h"
#include "io/quantized_checkpoint.h"
#include "io/token_dataset.h"

namespace gatedlm::infer {

namespace fs = std::filesystem;

namespace {

// The tokenizer recorded for a run directory's data, or null.
std::unique_ptr<io::Tokenizer> from_run(const fs::path& run, std::string& source) {
  const fs::path info = run / "run.json";
  if (!fs::is_regular_file(info)) return nullptr;
  nlohmann::json j;
  try {
    std::ifstream in(info);
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail(info.string(), ": not valid JSON (", e.what(), ")");
  }
  if (!j.contains("data") || !j["data"].is_string()) return nullptr;
  const std::string data = j["data"].get<std::string>();
  if (!fs::exists(fs::path(data) / "manifest.json")) return nullptr;
  source = data + " (the run's data, from " + info.string() + ")";
  return io::TokenDataset::open(data).tokenizer();
}

}  // namespace

std::unique_ptr<io::Tokenizer> recorded_tokenizer(const std::string& checkpoint, const std::string& checkpoint_dir,
                                                  std::string& source) {
  const fs::path ck_dir = fs::absolute(checkpoint_dir);
  const fs::path given = fs::absolute(checkpoint);
  // The run: the path given when it holds run.json, else two levels above the checkpoint.
  const fs::path run = fs::exists(given / "run.json") ? given : ck_dir.parent_path().parent_path();
  std::unique_ptr<io::Tokenizer> tokenizer = from_run(run, source);
  for (const fs::path& dir : {ck_dir, run, run.parent_path().parent_path()}) {
    for (const char* name : {"tokenizer.model", "tokenizer.json"}) {
      if (tokenizer || !fs::is_regular_file(dir / name)) continue;
      tokenizer = io::Tokenizer::load((dir / name).string());
      source = (dir / name).string();
    }
  }
  return tokenizer;
}

void check_tokenizer_fits(const io::Tokenizer& tokenizer, const std::string& source, int64_t vocab_size,
                          const std::string& checkpoint) {
  if (tokenizer.vocab_size() > vocab_size)
    fail(source, ": the tokenizer has ", tokenizer.vocab_size(), " ids, more than the model's vocab_size ", vocab_size,
         " (", checkpoint, ")");
}

LoadedModel load_model(const std::string& checkpoint, const std::string& tokenizer_flag) {
  LoadedModel out;
  io::InferenceModel loaded = io::load_inference_model(checkpoint);
  out.checkpoint_dir = loaded.checkpoint_dir;
  out.model = std::move(loaded.model);
  out.quantized = std::move(loaded.quantized);
  if (!tokenizer_flag.empty()) {
    out.tokenizer = io::Tokenizer::load(tokenizer_flag);
    out.tokenizer_source = "--tokenizer " + tokenizer_flag;
  } else {
    out.tokenizer = recorded_tokenizer(checkpoint, out.checkpoint_dir, out.tokenizer_source);
    if (!out.tokenizer)
      fail(checkpoint, ": no tokenizer recorded for this checkpoint (no run.json naming its data, no "
                       "tokenizer.model or tokenizer.json beside it); give --tokenizer byte|FILE.model|tokenizer.json");
  }
  check_tokenizer_fits(*out.tokenizer, out.tokenizer_source, out.model->config().vocab_size, checkpoint);
  return out;
}

}  // namespace gatedlm::infer
