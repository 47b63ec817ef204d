#include "demo/preset.h"

#include <filesystem>
#include <set>

#include "core/error.h"
#include "core/json_file.h"
#include "core/sha256.h"
#include "io/named_config.h"
#include "io/tokenizer.h"

namespace gatedlm::demo {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

void check_keys(const json& j, const std::string& path) {
  static const std::set<std::string> known{"description",
                                           "minutes",
                                           "steps",
                                           "tokenizer_vocab",
                                           "val_fraction",
                                           "model",
                                           "train",
                                           "warmup_fraction",
                                           "evals",
                                           "probes",
                                           "saves",
                                           "heldout_tokens",
                                           "analyze_sequences",
                                           "analyze_seq_len",
                                           "data"};
  for (const auto& [k, v] : j.items())
    if (!known.count(k)) fail(path, ": unknown key \"", k, "\"");
}

void read_numbers(const json& j, Preset& p) {
  try {
    p.description = j.value("description", "");
    p.minutes = j.value("minutes", p.minutes);
    p.steps = j.value("steps", p.steps);
    p.vocab = j.value("tokenizer_vocab", p.vocab);
    p.val_fraction = j.value("val_fraction", p.val_fraction);
    p.warmup_fraction = j.value("warmup_fraction", p.warmup_fraction);
    p.evals = j.value("evals", p.evals);
    p.probes = j.value("probes", p.probes);
    p.saves = j.value("saves", p.saves);
    p.heldout_tokens = j.value("heldout_tokens", p.heldout_tokens);
    p.analyze_sequences = j.value("analyze_sequences", p.analyze_sequences);
    p.analyze_seq_len = j.value("analyze_seq_len", p.analyze_seq_len);
  } catch (const json::exception& e) {
    fail(p.path, ": ", e.what());
  }
}

void read_model_and_train(const json& j, Preset& p) {
  if (!j.contains("model") || !j["model"].is_object())
    fail(p.path, ": \"model\" (a model config without vocab_size) is required");
  p.model = j["model"];
  if (p.model.contains("vocab_size")) fail(p.path, ": model.vocab_size comes from the tokenizer (tokenizer_vocab)");
  if (p.model.contains("gate")) fail(p.path, ": model.gate is set by the demo (baseline: none, gated: sdpa)");
  p.train = j.value("train", json::object());
  if (!p.train.is_object()) fail(p.path, ": \"train\" must be an object");
  for (const char* k : {"steps", "tokens", "minutes", "warmup", "eval_every", "save_every", "probe_every"})
    if (p.train.contains(k))
      fail(p.path, ": train.", k,
           " is planned by the demo (use steps, minutes, warmup_fraction, evals, probes, saves)");
}

void check_ranges(const Preset& p) {
  if (!(p.minutes > 0)) fail(p.path, ": minutes must be > 0");
  if (p.steps < 0 || p.evals < 1 || p.probes < 1 || p.saves < 1 || p.heldout_tokens < 1 || p.analyze_sequences < 1 ||
      p.analyze_seq_len < 2)
    fail(p.path, ": steps >= 0, evals, probes, saves, heldout_tokens, analyze_sequences >= 1 and analyze_seq_len >= 2");
  if (!(p.warmup_fraction >= 0 && p.warmup_fraction < 1)) fail(p.path, ": warmup_fraction must be in [0, 1)");
  if (p.vocab < io::kMinTrainedVocab) fail(p.path, ": tokenizer_vocab must be at least ", io::kMinTrainedVocab);
}

}  // namespace

std::string find_preset(const std::string& name) { return io::find_named_config("demo", "demo", name); }

Preset preset_from_json(const json& j, const std::string& path) {
  Preset p;
  p.path = path;
  p.name = fs::path(path).stem().string();
  if (!j.is_object()) fail(path, ": a preset is a JSON object");
  check_keys(j, path);
  read_numbers(j, p);
  read_model_and_train(j, p);
  if (j.contains("data")) {
    p.synthetic = true;
    p.data = synthetic_data_from_json(j["data"], path);
  }
  check_ranges(p);
  return p;
}

Preset load_preset(const std::string& name) {
  const std::string path = find_preset(name);
  const std::string text = read_whole_file(path, "demo preset");
  Preset p = preset_from_json(parse_json_strict(text, path), path);
  p.file_sha = sha256_hex(text);
  return p;
}

}  // namespace gatedlm::demo
