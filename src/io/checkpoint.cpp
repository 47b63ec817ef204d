#include "io/checkpoint.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/memory.h"
#include "io/safetensors.h"

namespace gatedlm::io {

namespace fs = std::filesystem;

void save_checkpoint(const std::string& dir, const model::ModelConfig& config, std::span<const float> params) {
  const model::ParamLayout layout(config);
  if (static_cast<int64_t>(params.size()) != layout.total())
    fail("save_checkpoint: ", params.size(), " parameters given, the config needs ", layout.total());
  require_usable_weights(config, params, cat("save_checkpoint ", dir));  // nothing every loader would refuse
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail(dir, ": cannot create the checkpoint directory (", ec.message(), ")");
  std::vector<TensorRef> refs;
  for (const model::ParamSpec& s : layout.specs()) refs.push_back({s.name, s.shape, params.data() + s.offset});
  write_safetensors((fs::path(dir) / "model.safetensors").string(), refs, {{"format", "pt"}});
  write_file_atomic((fs::path(dir) / "config.json").string(), model::config_to_json(config).dump(2) + "\n");
}

void require_finite(const float* values, int64_t n, const std::string& where) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(values[i]))
      fail(where, ": element ", i, " is ", values[i], " (NaN or Inf weights give meaningless results)");
}

void require_finite_rows(kernels::ElementType type, const uint8_t* data, int64_t rows, int64_t cols,
                         const std::string& where, int64_t first_row) {
  constexpr int64_t kChunkRows = 64;
  const int64_t row_bytes = kernels::element_row_bytes(type, cols);
  std::vector<float> values(static_cast<size_t>(std::min(rows, kChunkRows) * cols));
  for (int64_t r = 0; r < rows; r += kChunkRows) {
    const int64_t n = std::min(kChunkRows, rows - r);
    for (int64_t i = 0; i < n; ++i) kernels::element_to_f32(type, values.data() + i * cols, data + (r + i) * row_bytes, cols);
    for (int64_t i = 0; i < n * cols; ++i)
      if (!std::isfinite(values[i]))
        fail(where, ": row ", first_row + r + i / cols, ", column ", i % cols, " is ", values[i],
             " (NaN or Inf weights give meaningless results)");
  }
}

void require_usable_weights(const model::ModelConfig& config, std::span<const float> params, const std::string& where) {
  const model::ParamLayout layout(config);
  for (const model::ParamSpec& s : layout.specs()) {
    const float* v = params.data() + s.offset;
    require_finite(v, s.numel, cat(where, ": tensor ", s.name));
    if (!s.name.ends_with(".linear_attn.A_log")) continue;
    for (int64_t i = 0; i < s.numel; ++i)  // the decay rate is -exp(A_log): above log(FLT_MAX) it is -Inf
      if (v[i] > kMaxExpArgument)
        fail(where, ": tensor ", s.name, ": element ", i, " is ", v[i], ", whose exp overflows float32 (the "
             "Gated DeltaNet's decay rate -exp(A_log) would be -Inf and its output NaN)");
  }
}

std::string resolve_checkpoint_dir(const std::string& path) {
  const fs::path p(path);
  if (fs::exists(p / "latest")) {  // a run directory (it also holds a config.json)
    std::ifstream in(p / "latest");
    std::string name;
    std::getline(in, name);
    const fs::path ck = p / "checkpoints" / name;
    if (name.empty() || !fs::is_directory(ck))
      fail(path, ": the run's latest file names checkpoint \"", name, "\", which does not exist");
    return ck.string();
  }
  if (fs::exists(p / "model.safetensors") || fs::exists(p / "config.json")) return path;
  if (!fs::exists(p)) fail(path, ": no such checkpoint or run directory");
  fail(path, ": neither a checkpoint (config.json + model.safetensors) nor a run directory (latest)");
}

namespace {

// The checkpoint directory of `path` and its two files, checked to exist.
struct CheckpointFiles {
  std::string dir;
  fs::path config, weights;
};
CheckpointFiles checkpoint_files(const std::string& path) {
  const std::string dir = resolve_checkpoint_dir(path);
  const fs::path config_path = fs::path(dir) / "config.json";
  const fs::path weights_path = fs::path(dir) / "model.safetensors";
  if (!fs::is_directory(dir)) fail(dir, ": not a checkpoint directory (it does not exist or is not a directory)");
  if (!fs::exists(config_path)) fail(dir, ": no config.json in the checkpoint directory");
  if (!fs::exists(weights_path)) fail(dir, ": no model.safetensors in the checkpoint directory");
  return {dir, config_path, weights_path};
}

}  // namespace

model::ModelConfig load_checkpoint_config(const std::string& path) {
  const CheckpointFiles files = checkpoint_files(path);
  model::ModelConfig config = model::load_config(files.config.string());
  // The caller allocates the fp32 weights next: refuse a model this machine cannot hold.
  require_memory(cat("loading ", files.weights.string()),
                 saturating_mul(static_cast<uint64_t>(model::ParamLayout(config).total()), 4), "");
  return config;
}

void load_checkpoint_weights(const std::string& path, const model::ModelConfig& config, std::span<float> out) {
  const CheckpointFiles files = checkpoint_files(path);
  const fs::path& config_path = files.config;
  const fs::path& weights_path = files.weights;
  const model::ParamLayout layout(config);
  if (static_cast<int64_t>(out.size()) != layout.total())
    fail("load_checkpoint_weights: ", out.size(), " values for a model of ", layout.total(), " parameters");
  SafetensorsReader reader(weights_path.string());
  if (const auto q = reader.metadata().find(kQuantizedKey); q != reader.metadata().end())
    fail(weights_path.string(), ": an inference checkpoint with ", q->second,
         " weights (written by gatedlm quantize); training, resuming, export, quantize and debug grads need F32 "
         "weights: use the checkpoint it was quantised from (generate, serve, score, eval, analyze, stream-eval, "
         "longctx, bench generate, debug decode and Python's Model.load accept it)");
  for (const auto& [name, entry] : reader.tensors())
    if (!layout.find(name))
      fail(weights_path.string(), ": unexpected tensor ", name, " (the config in ", config_path.string(),
           " has no such parameter)");
  for (const model::ParamSpec& s : layout.specs()) {
    if (!reader.has(s.name)) fail(weights_path.string(), ": missing tensor ", s.name);
    const TensorEntry& e = reader.entry(s.name);
    if (e.shape != s.shape) {
      auto show = [](const std::vector<int64_t>& v) {
        std::string out = "[";
        for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
        return out + "]";
      };
      fail(weights_path.string(), ": tensor ", s.name, " has shape ", show(e.shape), ", the config needs ",
           show(s.shape));
    }
    reader.read_f32(s.name, out.data() + s.offset, s.numel);
    require_finite(out.data() + s.offset, s.numel, cat(weights_path.string(), ": tensor ", s.name));
  }
}

Checkpoint load_checkpoint(const std::string& path) {
  Checkpoint ck;
  ck.config = load_checkpoint_config(path);
  ck.params.resize(model::ParamLayout(ck.config).total());
  load_checkpoint_weights(path, ck.config, ck.params);
  return ck;
}

}  // namespace gatedlm::io
