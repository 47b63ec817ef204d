#include "demo/prepare.h"

#include "core/error.h"
#include "core/format.h"
#include "core/sha256.h"
#include "demo/synthetic_data.h"
#include "io/token_dataset.h"
#include "io/tokenizer.h"

namespace gatedlm::demo {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

void prepare_tokenizer(const fs::path& out, const Preset& preset, const TextSources& texts, bool fresh,
                       const StageLog& log, const PreparedData& d) {
  if (d.byte_tokenizer) {
    log.say("tokenizer", "bytes (the synthetic data's symbols are the corpus's bytes)");
    return;
  }
  const std::string stamp = (out / "tokenizer.key").string();
  const std::string key = stage_key({"tokenizer", texts.corpus_sha, preset.vocab});
  if (!fresh && fs::exists(d.tokenizer_path) && stamp_matches(stamp, key)) {
    log.say("tokenizer", cat("reusing ", d.tokenizer_path));
    return;
  }
  log.say("tokenizer", cat("training SentencePiece BPE, vocabulary ", preset.vocab, " ..."));
  remove_stamp(stamp);
  io::TokenizerTrainOptions to;
  to.inputs = texts.corpus_inputs;
  to.vocab_size = preset.vocab;
  to.out = d.tokenizer_path;
  to.raise_to_characters = true;  // a preset's vocabulary fits any corpus it is given
  const int64_t trained = io::train_tokenizer(to);
  if (trained != preset.vocab)
    log.say("tokenizer", cat("vocabulary raised from ", preset.vocab, " to ", trained,
                             ": the ids reserved for unk, BOS, EOS and the 256 byte pieces plus one per character of "
                             "this corpus need that many"));
  write_stamp(stamp, key);
}

std::string shards_key(const Preset& preset, const TextSources& texts, const PreparedData& d) {
  if (!preset.synthetic)
    return stage_key({"data", sha256_file_hex(d.tokenizer_path), texts.corpus_sha, preset.val_fraction});
  return stage_key({"data", d.byte_tokenizer ? std::string("byte") : sha256_file_hex(d.tokenizer_path),
                    texts.corpus_sha, preset.data.to_json()});
}

json synthetic_record(const PreparedData& d) {
  const json manifest = read_json_or_null((fs::path(d.data_dir) / "manifest.json").string());
  return manifest.is_object() ? manifest.value("synthetic", json()) : json();
}

void write_shards(const Preset& preset, const TextSources& texts, const StageLog& log, const PreparedData& d) {
  if (preset.synthetic) {
    log.say("data", cat("generating ", thousands(preset.data.tokens), " tokens of ", preset.data.task,
                        " from the corpus's bigram statistics into ", d.data_dir, " ..."));
    write_synthetic_data(preset.data, texts.corpus_inputs, d.byte_tokenizer ? "byte" : d.tokenizer_path, d.data_dir);
    return;
  }
  log.say("data", cat("tokenizing into ", d.data_dir, " (validation: the last ", preset.val_fraction * 100,
                      "% of every document) ..."));
  io::PrepareOptions po;
  po.tokenizer = d.tokenizer_path;
  po.inputs = texts.corpus_inputs;
  po.out = d.data_dir;
  po.val_fraction = preset.val_fraction;
  po.force = true;
  io::prepare_dataset(po);
}

}  // namespace

PreparedData prepare_data(const fs::path& out, const Preset& preset, const TextSources& texts, bool fresh,
                          const StageLog& log) {
  PreparedData d;
  d.byte_tokenizer = preset.synthetic && preset.data.byte_tokenizer();
  d.tokenizer_path = (out / "tokenizer.model").string();
  d.data_dir = (out / "data").string();
  prepare_tokenizer(out, preset, texts, fresh, log, d);
  d.data_key = shards_key(preset, texts, d);
  const std::string stamp = (out / "data.key").string();
  if (!fresh && fs::exists(fs::path(d.data_dir) / "manifest.json") && stamp_matches(stamp, d.data_key)) {
    log.say("data", cat("reusing ", d.data_dir));
  } else {
    remove_stamp(stamp);
    write_shards(preset, texts, log, d);
    write_stamp(stamp, d.data_key);
  }
  if (preset.synthetic) d.synthetic = synthetic_record(d);
  return d;
}

}  // namespace gatedlm::demo
