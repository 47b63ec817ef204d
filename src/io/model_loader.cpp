#include "io/model_loader.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "core/error.h"
#include "core/json_file.h"
#include "io/checkpoint.h"
#include "io/gguf_import.h"
#include "io/hf_config.h"
#include "io/hf_convert.h"
#include "io/model_tokenizer.h"
#include "io/quantized_checkpoint.h"
#include "io/tokenizer_json.h"

namespace gatedlm::io {

namespace fs = std::filesystem;

const char* to_string(ModelFileKind kind) {
  switch (kind) {
    case ModelFileKind::checkpoint: return "checkpoint";
    case ModelFileKind::run_directory: return "run directory";
    case ModelFileKind::quantized_checkpoint: return "quantized checkpoint";
    case ModelFileKind::hf_directory: return "Hugging Face directory";
    case ModelFileKind::gguf_file: return "GGUF file";
  }
  return "?";
}

std::string LoadedModel::weight_format() const {
  return quantized ? quantized->formats().name : "f32";
}

namespace {

// fs::status without exceptions: a dangling or looping symlink, or a path that cannot be
// looked at, is named with the system's reason.
fs::file_status status_of(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory)
    fail(path, ": cannot look at it (", ec.message(), ")");
  if (!fs::exists(st)) fail(path, ": no such file or directory");
  return st;
}

// The first bytes of a file, printable ones as they are, for "not a GGUF file" messages.
std::string first_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char head[4] = {};
  in.read(head, 4);
  std::string shown;
  for (std::streamsize i = 0; i < in.gcount(); ++i) {
    const auto c = static_cast<unsigned char>(head[i]);
    shown += c >= 0x20 && c < 0x7f ? std::string(1, static_cast<char>(c)) : cat("\\x", "0123456789abcdef"[c >> 4],
                                                                                  "0123456789abcdef"[c & 15]);
  }
  return shown;
}

// A Hugging Face model directory: a config.json with a model_type key, and no run's `latest`.
bool holds_hf_config(const fs::path& dir) {
  const fs::path config = dir / "config.json";
  if (fs::exists(dir / "latest") || !fs::is_regular_file(config)) return false;
  const nlohmann::json j = read_json_file(config.string(), "config");
  return j.is_object() && j.contains("model_type");
}

ModelFileKind detect_directory(const std::string& path, const std::string& format) {
  const fs::path dir(path);
  const bool hf_asked = format != "auto" && format != "gatedlm";
  if (hf_asked || (format == "auto" && holds_hf_config(dir))) {
    if (!fs::is_regular_file(dir / "config.json")) fail(path, ": no config.json (a Hugging Face model directory has one)");
    return ModelFileKind::hf_directory;
  }
  if (fs::exists(dir / "latest")) return ModelFileKind::run_directory;
  if (!fs::exists(dir / "config.json") && !fs::exists(dir / "model.safetensors"))
    fail(path, ": not a model: no config.json (a checkpoint or Hugging Face model directory) and no `latest` "
               "(a training run directory)");
  return checkpoint_quant_format(path) ? ModelFileKind::quantized_checkpoint : ModelFileKind::checkpoint;
}

void load_checkpoint_model(LoadedModel& out, bool release_f32) {
  out.checkpoint_dir = resolve_checkpoint_dir(out.path);
  CheckpointModel read = read_checkpoint_model(out.checkpoint_dir, release_f32);
  out.model = std::move(read.model);
  out.quantized = std::move(read.quantized);
}

// A Hugging Face directory, imported in memory. `format`: "auto" or a family name.
void load_hf_model(LoadedModel& out, const std::string& format) {
  out.checkpoint_dir = out.path;
  ImportedModel imported = import_hf(out.path, format == "auto" ? std::nullopt : std::optional(parse_hf_format(format)));
  out.model = std::make_unique<model::Model<float>>(imported.checkpoint.config);
  out.model->load_params(imported.checkpoint.params);
}

// A GGUF file, imported in memory, its quantised tensors kept as their blocks where they can
// be (io/gguf_blocks.h), with the tokenizer its vocabulary makes (if any).
void load_gguf_model(LoadedModel& out, bool release_f32) {
  out.checkpoint_dir = out.path;
  GgufImport imported(out.path);
  out.model = std::make_unique<model::Model<float>>(imported.config());
  model::WeightFormats formats = imported.block_formats();
  if (!formats.tensors.empty())
    out.quantized = std::make_unique<model::QuantizedWeights>(out.model->layout(), std::move(formats));
  imported.read_weights(out.model->params(), out.quantized.get());
  if (out.quantized) {
    if (!release_f32) out.quantized->dequantize_into(out.model->params());
    out.quantized->attach(*out.model);
    if (release_f32) out.quantized->release_f32();
  }
  const GgufVocabulary& vocabulary = imported.vocabulary();
  if (vocabulary.byte_tokenizer) {
    out.tokenizer = Tokenizer::load("byte");
    out.tokenizer_source = out.path + " (its vocabulary: gatedlm's byte tokenizer)";
  } else if (!vocabulary.tokenizer_json.empty()) {
    out.tokenizer_source = out.path + " (its vocabulary)";
    out.tokenizer = tokenizer_json_from_text(vocabulary.tokenizer_json, out.tokenizer_source);
  }
}

// --tokenizer, else what the model carries, else what is recorded beside it.
void attach_tokenizer(LoadedModel& out, const ModelLoadOptions& options) {
  if (!options.tokenizer.empty()) {
    out.tokenizer = Tokenizer::load(options.tokenizer);
    out.tokenizer_source = "--tokenizer " + options.tokenizer;
  } else if (!out.tokenizer && out.kind == ModelFileKind::hf_directory) {
    out.tokenizer = tokenizer_beside(out.path, out.tokenizer_source);
  } else if (!out.tokenizer && out.kind != ModelFileKind::gguf_file) {
    out.tokenizer = recorded_tokenizer(out.path, out.checkpoint_dir, out.tokenizer_source);
  }
  if (!out.tokenizer) {
    if (options.require_tokenizer)
      fail(out.path, ": no tokenizer recorded for this ", to_string(out.kind),
           " (no run.json naming its data, no tokenizer.model or tokenizer.json beside it, no vocabulary in a GGUF "
           "file); give --tokenizer byte|FILE.model|tokenizer.json");
    return;
  }
  check_tokenizer_fits(*out.tokenizer, out.tokenizer_source, out.model->config().vocab_size, out.path);
}

}  // namespace

ModelFileKind detect_model_file(const std::string& path, const std::string& format) {
  const fs::file_status st = status_of(path);
  if (fs::is_directory(st)) {
    if (format == "gguf") fail(path, ": a directory, not a GGUF file (--format gguf)");
    return detect_directory(path, format);
  }
  if (is_gguf_file(path)) {
    if (format != "auto" && format != "gguf")
      fail(path, ": a GGUF file, not a directory of format \"", format, "\"");
    return ModelFileKind::gguf_file;
  }
  fail(path, ": not a model: a file that is not GGUF (it starts with \"", first_bytes(path),
       "\", not \"GGUF\"); a checkpoint, run or Hugging Face model is a directory");
}

namespace {

// Weights that are finite as stored can still overflow once used (a Gated DeltaNet's A_log
// above 88 makes exp(A_log) infinite in float32): one token through the model, and its
// logits must be finite, or no command runs it.
void require_finite_first_step(const LoadedModel& loaded) {
  model::Model<float>& m = *loaded.model;
  const int32_t token = 0;
  m.forward(&token, nullptr, 1, 1);
  const float* logits = m.logits();
  int64_t bad = 0;
  for (int64_t i = 0; i < m.config().vocab_size; ++i) bad += !std::isfinite(logits[i]);
  if (bad > 0)
    fail(loaded.path, ": the model's first step gives ", bad, " non-finite logits (NaN or Inf) of ",
         m.config().vocab_size, ": its weights overflow float32 when used (a linear-attention A_log above 88 "
         "does), so no output of it means anything");
}

}  // namespace

LoadedModel load_model(const std::string& path, const ModelLoadOptions& options) {
  LoadedModel out;
  out.path = path;
  out.kind = detect_model_file(path, options.format);
  switch (out.kind) {
    case ModelFileKind::gguf_file: load_gguf_model(out, options.release_f32); break;
    case ModelFileKind::hf_directory: load_hf_model(out, options.format); break;
    default: load_checkpoint_model(out, options.release_f32); break;
  }
  require_finite_first_step(out);
  attach_tokenizer(out, options);
  return out;
}

}  // namespace gatedlm::io
