#pragma once
// The one loader: any path that names a model becomes an inference-ready model, for every
// command that runs one (generate, serve, score, eval, analyze, stream-eval, longctx, bench,
// debug) and for the Python module. What a path is (detect_model_file):
//   gguf_file             a file starting with GGUF's magic: llama.cpp's format, imported in
//                         memory (io/gguf_import.h), its vocabulary as the tokenizer; its
//                         quantised tensors keep their blocks, which the products run on
//                         (io/gguf_blocks.h; `quantized` is set);
//   hf_directory          a directory with a config.json that has a "model_type" key and no
//                         `latest`: a Hugging Face model of any family (io/hf_convert.h),
//                         its tokenizer.json (or tokenizer.model) beside it;
//   run_directory         a training run (RUN/latest names its newest checkpoint);
//   checkpoint            a checkpoint directory (config.json + model.safetensors, F32);
//   quantized_checkpoint  the same written by `gatedlm quantize` or by `import` of a quantised
//                         GGUF file (io/quantized_checkpoint.h):
//                         the weight blocks are kept and the products run on them.
// A run directory's latest checkpoint may itself be quantised (then `quantized` is set).
// Nothing is written anywhere: no temporary files, so any number of loads may run at once.
#include <memory>
#include <string>

#include "io/tokenizer.h"
#include "model/model.h"
#include "model/quantized_weights.h"

namespace gatedlm::io {

enum class ModelFileKind { checkpoint, run_directory, quantized_checkpoint, hf_directory, gguf_file };
const char* to_string(ModelFileKind kind);

struct ModelLoadOptions {
  // "auto" (detect_model_file), "gatedlm" (a checkpoint or run directory), "gguf", or a
  // Hugging Face family name (io/hf_config.h: paper, qwen3, ...) for a directory read as
  // that family instead of the one its config names.
  std::string format = "auto";
  // Quantised checkpoints: give the fp32 pages of the matrices that only products read back
  // to the system (QuantizedWeights::release_f32). False where something reads the weight
  // values themselves (analyze).
  bool release_f32 = true;
  // A tokenizer spec (--tokenizer: byte, a .model, a tokenizer.json) that replaces the
  // model's own; empty: the model's own (io/model_tokenizer.h says where it is looked for).
  std::string tokenizer;
  // Fail, naming the path, when no tokenizer is found (the commands that read text); else
  // LoadedModel::tokenizer stays null.
  bool require_tokenizer = false;

  // The commands that read text (generate, serve, stream-eval): --tokenizer as given, and a
  // tokenizer required.
  static ModelLoadOptions reading_text(const std::string& tokenizer_flag) {
    ModelLoadOptions o;
    o.tokenizer = tokenizer_flag;
    o.require_tokenizer = true;
    return o;
  }
};

struct LoadedModel {
  std::string path;            // as given
  std::string checkpoint_dir;  // the resolved checkpoint, the Hugging Face directory or the GGUF file
  ModelFileKind kind = ModelFileKind::checkpoint;
  std::unique_ptr<model::Model<float>> model;
  // The blocks of a quantised checkpoint or GGUF file, attached to model's buffer (null
  // otherwise).
  // Declared after model: destroyed (and detached) first.
  std::unique_ptr<model::QuantizedWeights> quantized;
  std::shared_ptr<Tokenizer> tokenizer;  // null when none was found and none was required
  std::string tokenizer_source;          // where it came from (for messages and JSON)
  std::string weight_format() const;     // "f32", or the blocks' name: "q8_0", "q4_k_m", ...
};

// What `path` is for `format` (see ModelLoadOptions::format). Throws naming the path when
// it is none of them: missing, a file that is not GGUF (naming its first bytes), a
// directory that holds no model.
ModelFileKind detect_model_file(const std::string& path, const std::string& format = "auto");

LoadedModel load_model(const std::string& path, const ModelLoadOptions& options = {});

}  // namespace gatedlm::io
