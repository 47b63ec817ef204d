#include "demo/synthetic_data.h"

#include <set>

#include "core/error.h"
#include "eval/synth_bigram_backcopy.h"

namespace gatedlm::demo {

using nlohmann::json;

json SyntheticData::to_json() const {
  return {{"task", task},         {"tokenizer", tokenizer}, {"seq_len", seq_len},          {"tokens", tokens},
          {"triggers", triggers}, {"seed", seed},           {"val_fraction", val_fraction}};
}

SyntheticData synthetic_data_from_json(const json& j, const std::string& source) {
  if (!j.is_object()) fail(source, ": \"data\" must be an object ({\"task\": \"bigram-backcopy\", ...})");
  static const std::set<std::string> known{"task", "tokenizer", "seq_len", "tokens", "triggers", "seed", "val_fraction"};
  for (const auto& [k, v] : j.items())
    if (!known.count(k)) fail(source, ": unknown key \"data.", k, "\"");
  SyntheticData d;
  try {
    d.task = j.value("task", std::string());
    d.tokenizer = j.value("tokenizer", d.tokenizer);
    d.seq_len = j.value("seq_len", d.seq_len);
    d.tokens = j.value("tokens", d.tokens);
    d.triggers = j.value("triggers", d.triggers);
    d.seed = j.value("seed", d.seed);
    d.val_fraction = j.value("val_fraction", d.val_fraction);
  } catch (const json::exception& e) {
    fail(source, ": data: ", e.what());
  }
  if (d.task != "bigram-backcopy") fail(source, ": data.task \"", d.task, "\" is not known (bigram-backcopy)");
  if (d.tokenizer != "byte" && d.tokenizer != "trained")
    fail(source, ": data.tokenizer \"", d.tokenizer, "\" must be byte or trained");
  if (d.seq_len < 3) fail(source, ": data.seq_len must be at least 3, got ", d.seq_len);
  if (d.tokens < 1) fail(source, ": data.tokens must be at least 1, got ", d.tokens);
  if (d.triggers < 1) fail(source, ": data.triggers must be at least 1, got ", d.triggers);
  if (!(d.val_fraction >= 0 && d.val_fraction < 1)) fail(source, ": data.val_fraction must be in [0, 1)");
  return d;
}

void write_synthetic_data(const SyntheticData& spec, const std::vector<std::string>& corpus_inputs,
                          const std::string& tokenizer_spec, const std::string& out_dir) {
  eval::BigramBackcopyOptions o;
  o.corpus = corpus_inputs;
  o.tokenizer = tokenizer_spec;
  o.out = out_dir;
  o.triggers = spec.triggers;
  o.seq_len = spec.seq_len;
  o.tokens = spec.tokens;
  o.val_fraction = spec.val_fraction;
  o.seed = spec.seed;
  o.force = true;
  eval::synthesize_bigram_backcopy(o);
}

}  // namespace gatedlm::demo
