#include "io/hf_convert.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_file.h"
#include "core/progress.h"
#include "io/model_family.h"
#include "model/value_heads.h"

namespace gatedlm::io {

namespace fs = std::filesystem;

namespace {

// The gatedlm tensors held by one Hugging Face tensor (one, or two for the paper's fused
// q_proj), and that tensor's shape.
struct TheirTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<TensorMapping> parts;
};

int64_t row_width(const model::ParamSpec& s) { return s.shape.size() > 1 ? s.numel / s.shape[0] : 1; }

// Groups the layout's mappings by Hugging Face tensor, in layout order of first use.
std::vector<TheirTensor> their_tensors(const model::ModelConfig& c, const model::ParamLayout& layout,
                                       HfFormat format, const std::string& prefix,
                                       std::optional<bool> stacked_experts = std::nullopt) {
  std::vector<TheirTensor> out;
  std::map<std::string, size_t> index;
  for (const TensorMapping& m : format->map_tensors(c, layout, prefix, stacked_experts)) {
    const std::vector<int64_t>& shape = m.their_shape;
    auto [it, fresh] = index.emplace(m.theirs, out.size());
    if (fresh) out.push_back({m.theirs, shape, {}});
    TheirTensor& t = out[it->second];
    if (t.shape != shape) fail("internal error: parts of ", m.theirs, " disagree about its shape");
    t.parts.push_back(m);
  }
  return out;
}

// Copies every row r of one gatedlm tensor to or from row m.row(r) of the Hugging Face
// tensor: import reads src = theirs into dst = ours, export src = ours into dst = theirs.
enum class Direction { import, export_ };
void copy_rows(const TensorMapping& m, float* dst, const float* src, Direction dir) {
  const int64_t rows = m.spec->shape[0], width = row_width(*m.spec);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t ours = r * width, theirs = m.row(r) * width;
    const bool in = dir == Direction::import;
    std::memcpy(dst + (in ? ours : theirs), src + (in ? theirs : ours), static_cast<size_t>(width) * 4);
  }
}

std::string show(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

bool ignorable_tensor(const std::string& name) {
  const std::string suffix = "rotary_emb.inv_freq";  // a buffer older transformers saved
  return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The numbers N in names "<prefix>N.": which indices the file holds, as a set.
std::set<int64_t> indices_after(const std::map<std::string, TensorEntry>& tensors, const std::string& prefix) {
  std::set<int64_t> found;
  for (auto it = tensors.lower_bound(prefix); it != tensors.end() && it->first.compare(0, prefix.size(), prefix) == 0;
       ++it) {
    const size_t dot = it->first.find('.', prefix.size());
    const std::string digits = it->first.substr(prefix.size(), dot == std::string::npos ? dot : dot - prefix.size());
    if (!digits.empty() && digits.size() < 10 && digits.find_first_not_of("0123456789") == std::string::npos)
      found.insert(std::stoll(digits));
  }
  return found;
}

// Refuses, naming the first missing one, a layer or expert count that the weights' headers
// cannot hold: every layer i has tensors "<prefix>layers.i.*", every MoE layer experts
// 0..n_experts-1 (one tensor each, or stacked in gate_up_proj's first dimension). Costs one
// pass over the names, whatever the config asks for.
void check_counts_in_headers(const model::ModelConfig& c, const HfWeights& weights, const std::string& config,
                             const std::string& prefix, bool stacked_experts) {
  const std::string layers_prefix = prefix + "layers.";
  const std::set<int64_t> layers = indices_after(weights.tensors(), layers_prefix);
  for (int64_t i = 0; i < c.n_layers; ++i)
    if (!layers.count(i))
      fail(weights.source(), ": missing tensors ", layers_prefix, i, ".* (", config, " asks for ", c.n_layers,
           " layers in num_hidden_layers; the weights hold ", layers.size(), ")");
  for (int64_t i = 0; i < c.n_layers; ++i) {
    if (!c.moe.is_moe_layer(i)) continue;
    const std::string experts_prefix = cat(layers_prefix, i, ".mlp.experts.");
    if (stacked_experts) {
      const std::string name = experts_prefix + "gate_up_proj";
      if (weights.has(name) && (weights.entry(name).shape.empty() || weights.entry(name).shape[0] != c.moe.n_experts))
        fail(weights.file_of(name), ": tensor ", name, " stacks ", show(weights.entry(name).shape), ", but ", config,
             " asks for ", c.moe.n_experts, " experts in num_experts");
      continue;
    }
    const std::set<int64_t> experts = indices_after(weights.tensors(), experts_prefix);
    for (int64_t e = 0; e < c.moe.n_experts; ++e)
      if (!experts.count(e))
        fail(weights.source(), ": missing tensors ", experts_prefix, e, ".* (", config, " asks for ",
             c.moe.n_experts, " experts in num_experts; layer ", i, " holds ", experts.size(), ")");
  }
}

// How a hybrid checkpoint stores its experts, from the first MoE layer's names: stacked
// (mlp.experts.gate_up_proj, Qwen3.5-MoE's) or one tensor each (Qwen3-Next's); nullopt
// (the format's own) without MoE or when neither name is there.
std::optional<bool> stacked_experts_in(const model::ModelConfig& c, const HfWeights& weights, const std::string& prefix) {
  for (int64_t i = 0; i < c.n_layers; ++i) {
    if (!c.moe.is_moe_layer(i)) continue;
    const std::string experts = cat(prefix, "layers.", i, ".mlp.experts.");
    if (weights.has(experts + "gate_up_proj")) return true;
    if (weights.has(experts + "0.gate_proj.weight")) return false;
    return std::nullopt;
  }
  return std::nullopt;
}

// Tensors of a hybrid checkpoint that are not the language model: the vision tower
// ("model.visual.*") and the multi-token-prediction layers ("mtp.*"). Counted, skipped,
// and reported in one line each.
struct Skipped {
  int64_t vision = 0, mtp = 0;
  bool take(const std::string& name) {
    if (name.rfind("model.visual.", 0) == 0) return ++vision;
    if (name.rfind("mtp.", 0) == 0) return ++mtp;
    return false;
  }
  std::vector<std::string> notes() const {
    std::vector<std::string> out;
    if (vision) out.push_back(cat("skipped ", vision, " vision-tower tensors (model.visual.*): gatedlm imports the language model"));
    if (mtp) out.push_back(cat("skipped ", mtp, " multi-token-prediction tensors (mtp.*): gatedlm does not run MTP layers"));
    return out;
  }
};

}  // namespace

ImportedModel import_hf(const std::string& src_dir, std::optional<HfFormat> format) {
  if (!fs::is_directory(src_dir)) fail(src_dir, ": not a directory");
  const fs::path config_path = fs::path(src_dir) / "config.json";
  if (!fs::exists(config_path)) fail(src_dir, ": no config.json");
  const nlohmann::json hf = read_json_file(config_path.string(), "Hugging Face config");
  ImportedModel out{Checkpoint{}, format ? *format : detect_hf_format(hf), "", {}};
  model::ModelConfig& c = out.checkpoint.config;
  c = config_from_hf(hf, out.format, config_path.string());
  HfWeights weights(src_dir);
  out.weights_source = weights.source();
  // The layout holds a name per tensor: a config that asks for far more layers or experts
  // than the file holds is refused from the headers before it is built.
  const bool hybrid = out.format->hybrid;
  const std::string prefix = hybrid ? hf_weight_prefix(hf) : "model.";
  const std::optional<bool> stacked = hybrid ? stacked_experts_in(c, weights, prefix) : std::nullopt;
  check_counts_in_headers(c, weights, config_path.string(), prefix,
                          stacked.value_or(out.format->stacked_experts));
  const model::ParamLayout layout(c);
  const std::vector<TheirTensor> wanted = their_tensors(c, layout, out.format, prefix, stacked);

  // Every check before the first value is read.
  std::map<std::string, const TheirTensor*> by_name;
  for (const TheirTensor& t : wanted) {
    by_name[t.name] = &t;
    if (!weights.has(t.name))
      fail(weights.source(), ": missing tensor ", t.name, " (", config_path.string(), " asks for it)");
    const TensorEntry& e = weights.entry(t.name);
    if (e.shape != t.shape)
      fail(weights.file_of(t.name), ": tensor ", t.name, " has shape ", show(e.shape), ", the config needs ",
           show(t.shape));
    if (e.dtype != "F32" && e.dtype != "BF16" && e.dtype != "F16")
      fail(weights.file_of(t.name), ": tensor ", t.name, " has dtype ", e.dtype, "; gatedlm imports F32, BF16 and F16");
  }
  bool tied_head_to_check = false;
  Skipped skipped;
  for (const auto& [name, e] : weights.tensors()) {
    if (by_name.count(name) || ignorable_tensor(name) || (hybrid && skipped.take(name))) continue;
    if (name == "lm_head.weight" && c.tie_embeddings && e.shape == std::vector<int64_t>{c.vocab_size, c.d_model}) {
      tied_head_to_check = true;
      continue;
    }
    fail(weights.file_of(name), ": unexpected tensor ", name, " (", config_path.string(),
         " describes no such parameter for format ", to_string(out.format), ")");
  }

  out.notes = skipped.notes();
  std::vector<float>& params = out.checkpoint.params;
  params.assign(static_cast<size_t>(layout.total()), 0.0f);
  Progress progress("import", static_cast<int64_t>(wanted.size()));
  std::vector<float> scratch;
  for (size_t i = 0; i < wanted.size(); ++i) {
    const TheirTensor& t = wanted[i];
    const TensorMapping& first = t.parts[0];
    if (t.parts.size() == 1 && first.part == RowPart::all) {
      weights.read_f32(t.name, params.data() + first.spec->offset, first.spec->numel);
      require_finite(params.data() + first.spec->offset, first.spec->numel, cat(weights.file_of(t.name), ": tensor ", t.name));
    } else {
      const TensorEntry& e = weights.entry(t.name);
      scratch.resize(static_cast<size_t>(e.numel()));
      weights.read_f32(t.name, scratch.data(), e.numel());
      require_finite(scratch.data(), e.numel(), cat(weights.file_of(t.name), ": tensor ", t.name));
      for (const TensorMapping& m : t.parts) copy_rows(m, params.data() + m.spec->offset, scratch.data(), Direction::import);
    }
    progress.update(static_cast<int64_t>(i + 1), t.name);
  }
  progress.finish();
  if (tied_head_to_check) {
    const model::ParamSpec& embed = layout.at("model.embed_tokens.weight");
    scratch.resize(static_cast<size_t>(embed.numel));
    weights.read_f32("lm_head.weight", scratch.data(), embed.numel);
    if (std::memcmp(scratch.data(), params.data() + embed.offset, static_cast<size_t>(embed.numel) * 4) != 0)
      fail(weights.file_of("lm_head.weight"), ": tensor lm_head.weight differs from model.embed_tokens.weight, "
           "but the config ties them (tie_word_embeddings)");
  }
  return out;
}

std::vector<TensorMapping> map_tensors(const model::ModelConfig& c, const model::ParamLayout& layout, HfFormat format,
                                       const std::string& prefix, std::optional<bool> stacked_experts) {
  return format->map_tensors(c, layout, prefix, stacked_experts);
}

void export_hf(Checkpoint ck, HfFormat format, kernels::ElementType dtype, const std::string& out_dir) {
  const model::ModelConfig& c = ck.config;
  const char* torch_dtype = dtype == kernels::ElementType::f32 ? "float32" : dtype == kernels::ElementType::bf16 ? "bfloat16" : "float16";
  const nlohmann::ordered_json hf = config_to_hf(c, format, torch_dtype);
  const model::ParamLayout layout(c);
  if (static_cast<int64_t>(ck.params.size()) != layout.total()) fail("export: the checkpoint's parameter count does not match its config");
  // Checked first, then Hugging Face's grouped value heads (model/value_heads.h), in place:
  // ck is this function's own copy.
  model::reorder_value_heads(ck.config, ck.params, model::ValueHeadOrder::grouped);
  std::vector<TensorSource> sources;
  for (const TheirTensor& t : their_tensors(c, layout, format, "model.")) {
    TensorSource s{t.name, t.shape, {}};
    s.produce = [&ck, parts = t.parts](float* out) {
      for (const TensorMapping& m : parts) copy_rows(m, out, ck.params.data() + m.spec->offset, Direction::export_);
    };
    sources.push_back(std::move(s));
  }
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) fail(out_dir, ": cannot create the output directory (", ec.message(), ")");
  write_safetensors_as((fs::path(out_dir) / "model.safetensors").string(), sources, dtype, {{"format", "pt"}});
  write_file_atomic((fs::path(out_dir) / "config.json").string(), hf.dump(2) + "\n");
}

}  // namespace gatedlm::io
