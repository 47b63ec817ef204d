#include "io/gguf_import.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>

#include "core/error.h"
#include "core/progress.h"
#include "io/gguf_blocks.h"
#include "io/gguf_import_hybrid.h"
#include "io/gguf_reader.h"
#include "io/gguf_tables.h"
#include "io/gguf_tokenizer.h"

namespace gatedlm::io {

namespace {

// Keys under the architecture's prefix that hold no config number of their own, accepted
// with the one value that changes nothing; any other key there is refused by name.
struct ExtraKey {
  const char* key;
  const char* accepted;  // the value, as shown in the refusal
};
constexpr ExtraKey kExtraKeys[] = {{"rope.dimension_count", "attention.key_length (RoPE over whole heads)"},
                                   {"rope.scaling.type", "\"none\""}};

// The architectures gatedlm imports: those of the model families (io/model_family.h), which
// GGUF export writes (io/gguf_tables.h); the hybrid ones' own keys are read by
// io/gguf_import_hybrid.h.
const GgufArchitecture& file_architecture(const GgufReader& f) {
  const std::string name = f.get_string("general.architecture");
  if (const ModelFamily* family = find_gguf_family(name)) return *family->gguf;
  std::vector<std::string> known;
  for (const GgufArchitecture* a : gguf_architectures()) known.push_back(a->name);
  fail(f.path(), ": key general.architecture is \"", name, "\"; gatedlm imports ", join_names(known, "and"));
}

// Every key under "<arch>." is a config number (io/gguf_tables.h) or an extra key.
void check_known_keys(const GgufReader& f, const std::string& arch, bool moe) {
  const std::string prefix = arch + ".";
  std::set<std::string> known;
  if (gguf_is_hybrid(arch))
    for (const std::string& k : gguf_hybrid_keys(arch)) known.insert(prefix + k);
  for (const GgufIntKey& k : gguf_int_keys())
    if (!k.moe_field || moe) known.insert(prefix + k.key);
  for (const GgufFloatKey& k : gguf_float_keys()) known.insert(prefix + k.key);
  for (const ExtraKey& k : kExtraKeys) known.insert(prefix + k.key);
  for (const auto& [key, value] : f.metadata())
    if (key.compare(0, prefix.size(), prefix) == 0 && !known.count(key))
      fail(f.path(), ": key ", key, " is not supported (gatedlm maps no such setting of ", prefix.substr(0, prefix.size() - 1),
           "; importing without it would change the model)");
  if (f.has("split.count") && f.get_int("split.count", 0, INT64_MAX) > 1)
    fail(f.path(), ": key split.count: split GGUF files are not supported (merge them with llama-gguf-split --merge)");
}

// A float32 metadata value as the double nearest its shortest decimal form (1e-6f -> 1e-6),
// so that a config exported as f32 comes back as it was written.
double widen_f32(double x) {
  const float f = static_cast<float>(x);
  char text[32];
  for (int digits = 1; digits <= 9; ++digits) {
    std::snprintf(text, sizeof(text), "%.*g", digits, static_cast<double>(f));
    if (std::strtof(text, nullptr) == f) return std::strtod(text, nullptr);
  }
  return x;
}

// The config numbers by the key tables; two keys of one field must agree.
void read_config_keys(const GgufReader& f, const std::string& prefix, bool moe, model::ModelConfig& c) {
  std::map<const int64_t*, std::string> set_by;
  for (const GgufIntKey& k : gguf_int_keys()) {
    const std::string key = prefix + k.key;
    if ((k.moe_field && !moe) || !f.has(key)) continue;
    const int64_t v = f.get_int(key, 0, int64_t{1} << 31);
    int64_t& field = gguf_field(c, k);
    const auto [it, fresh] = set_by.emplace(&field, key);
    if (!fresh && field != v)
      fail(f.path(), ": keys ", it->second, " (", field, ") and ", key, " (", v, ") disagree; gatedlm holds one value for both");
    field = v;
  }
  std::vector<std::string> required{"context_length", "embedding_length", "block_count", "attention.head_count"};
  if (moe) required.insert(required.end(), {"expert_count", "expert_used_count", "expert_feed_forward_length"});
  else required.push_back("feed_forward_length");
  for (const std::string& k : required)
    if (!f.has(prefix + k)) fail(f.path(), ": missing key ", prefix, k);
  for (const GgufFloatKey& k : gguf_float_keys()) {
    const std::string key = prefix + k.key;
    if (!f.has(key)) continue;
    const double v = f.get_float(key);
    c.*k.field = f.metadata().at(key).type == 6 ? widen_f32(v) : v;
  }
  if (!f.has(prefix + "attention.layer_norm_rms_epsilon")) fail(f.path(), ": missing key ", prefix, "attention.layer_norm_rms_epsilon");
}

// llama.cpp's defaults for the keys a file may leave out, the settings its graphs fix, and
// the checks of the extra keys; the hybrid architectures' own keys (io/gguf_import_hybrid.h).
void complete_config(GgufReader& f, const std::string& arch, model::ModelConfig& c) {
  const std::string prefix = arch + ".";
  if (!f.has(prefix + "attention.head_count_kv")) c.n_kv_heads = c.n_heads;
  if (!f.has(prefix + "attention.key_length") && c.n_heads > 0) c.head_dim = c.d_model / c.n_heads;
  if (!f.has(prefix + "vocab_size")) {
    const GgufTensorInfo* embed = f.find_tensor("token_embd.weight");
    if (!embed) fail(f.path(), ": missing tensor token_embd.weight");
    c.vocab_size = embed->shape[0];
  }
  const bool hybrid = gguf_is_hybrid(arch);
  if (!hybrid && f.has(prefix + "rope.dimension_count") && f.get_int(prefix + "rope.dimension_count", 0, INT64_MAX) != c.head_dim)
    fail(f.path(), ": key ", prefix, "rope.dimension_count must equal attention.key_length (", c.head_dim,
         "): gatedlm imports RoPE over whole heads");
  if (f.has(prefix + "rope.scaling.type") && f.get_string(prefix + "rope.scaling.type") != "none")
    fail(f.path(), ": key ", prefix, "rope.scaling.type \"", f.get_string(prefix + "rope.scaling.type"),
         "\" is not supported (none)");
  c.rope_dims = c.head_dim;
  c.qk_norm = true;
  c.tie_embeddings = f.find_tensor("output.weight") == nullptr;  // llama.cpp then reuses token_embd
  c.rope_scaling.original_max_seq_len = c.max_seq_len;
  if (c.moe.enabled()) {
    c.moe.shared_hidden = c.moe.expert_hidden;
    c.moe.every = 1;              // every qwen3moe layer is sparse
    c.moe.norm_topk_prob = true;  // and renormalises the chosen experts' weights
  }
  c.norm_zero_centered = gguf_norm_zero_centered(f, arch);
  if (hybrid) read_hybrid_config(f, arch, c);
}

model::ModelConfig config_from_gguf(GgufReader& f, const GgufArchitecture& arch) {
  const std::string prefix = std::string(arch.name) + ".";
  check_known_keys(f, arch.name, arch.moe);
  model::ModelConfig c;
  read_config_keys(f, prefix, arch.moe, c);
  complete_config(f, arch.name, c);
  try {
    c.validate();
  } catch (const Error& e) {
    fail(f.path(), ": the model its metadata describes is not valid: ", e.what());
  }
  return c;
}

// Refuses, from the tensor table alone, a layer or expert count the file cannot hold, so
// that the layout is built only for one it does.
void check_counts(const GgufReader& f, const model::ModelConfig& c, const std::string& arch) {
  if (c.n_layers > static_cast<int64_t>(f.tensors().size()))
    fail(f.path(), ": key ", arch, ".block_count asks for ", c.n_layers, " layers; the file holds ", f.tensors().size(), " tensors");
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string norm = cat("blk.", i, ".attn_norm.weight");
    if (!f.find_tensor(norm))
      fail(f.path(), ": missing tensor ", norm, " (key ", arch, ".block_count asks for ", c.n_layers, " layers)");
    if (!c.moe.enabled()) continue;
    const std::string experts = cat("blk.", i, ".ffn_gate_exps.weight");
    const GgufTensorInfo* t = f.find_tensor(experts);
    if (!t) fail(f.path(), ": missing tensor ", experts);
    if (t->shape.size() != 3 || t->shape[0] != c.moe.n_experts)
      fail(f.path(), ": tensor ", experts, " does not stack the ", c.moe.n_experts, " experts key ", arch,
           ".expert_count asks for");
  }
}

std::string show(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// The block a tensor "blk.<l>.<...>" belongs to; -1 for any other name.
int64_t block_of(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  int64_t l = 0;
  size_t at = 4;
  for (; at < name.size() && name[at] >= '0' && name[at] <= '9' && l < (int64_t{1} << 40); ++at) l = l * 10 + (name[at] - '0');
  return at > 4 && at < name.size() && name[at] == '.' ? l : -1;
}

// Every tensor the layout needs is there, in its shape and a type gatedlm reads; no other,
// but those of the multi-token-prediction blocks from `mtp_from` on (returns how many).
int64_t check_tensors(const GgufReader& f, const std::vector<GgufTensor>& wanted, const std::string& arch,
                      int64_t mtp_from) {
  std::set<std::string> names;
  for (const GgufTensor& t : wanted) {
    names.insert(t.name);
    const GgufTensorInfo* info = f.find_tensor(t.name);
    if (!info) fail(f.path(), ": missing tensor ", t.name, " (the metadata asks for it)");
    if (!readable_as_f32(info->type))
      fail(f.path(), ": tensor ", t.name, " has type ", describe_ggml_type(info->type),
           "; gatedlm reads ", kernels::element_names_readable());
    if (info->shape != t.shape)
      fail(f.path(), ": tensor ", t.name, " has shape ", show(info->shape), ", the metadata needs ", show(t.shape));
  }
  int64_t skipped = 0;
  for (const GgufTensorInfo& t : f.tensors()) {
    if (names.count(t.name)) continue;
    if (mtp_from >= 0 && block_of(t.name) >= mtp_from) {
      ++skipped;
      continue;
    }
    fail(f.path(), ": unexpected tensor ", t.name, " (gatedlm's ", arch, " with this metadata has no such tensor)");
  }
  return skipped;
}

// The values, each tensor into its parameters: those `blocks` holds as their blocks
// (io/gguf_blocks.h); a tensor that is one whole parameter directly; any other (stacked
// experts, qwen35's attn_q) through a scratch buffer, run by run (io/gguf_tables.h; a run
// of zeros has no parameter and is skipped).
void read_tensors(GgufReader& f, const std::vector<GgufTensor>& wanted, std::span<float> params,
                  model::QuantizedWeights* blocks) {
  Progress progress("import", static_cast<int64_t>(wanted.size()));
  std::vector<float> scratch;
  for (size_t i = 0; i < wanted.size(); ++i) {
    const GgufTensor& t = wanted[i];
    const GgufTensorInfo& info = *f.find_tensor(t.name);
    const std::string where = cat(f.path(), ": tensor ", t.name);
    const GgufRun& first = t.runs.front();
    const bool kept = blocks && std::any_of(t.runs.begin(), t.runs.end(), [&](const GgufRun& r) {
      return r.spec && blocks->formats().of(*r.spec);
    });
    if (kept) {
      read_gguf_blocks(f, t, *blocks);
    } else if (t.runs.size() == 1 && first.spec) {
      float* dst = params.data() + first.spec->offset + first.begin;
      f.read_f32(info, dst, info.numel);
      require_finite(dst, info.numel, where);
    } else {
      scratch.resize(static_cast<size_t>(info.numel));
      f.read_f32(info, scratch.data(), info.numel);
      require_finite(scratch.data(), info.numel, where);
      const float* src = scratch.data();
      for (const GgufRun& run : t.runs) {
        if (run.spec)
          std::memcpy(params.data() + run.spec->offset + run.begin, src, static_cast<size_t>(run.count) * sizeof(float));
        src += run.count;
      }
    }
    progress.update(static_cast<int64_t>(i + 1), t.name);
  }
  progress.finish();
}

}  // namespace

GgufImport::GgufImport(const std::string& path) : file_(std::make_unique<GgufReader>(path)) {
  GgufReader& f = *file_;
  const GgufArchitecture& arch = file_architecture(f);
  architecture_ = arch.name;
  config_ = config_from_gguf(f, arch);
  check_counts(f, config_, arch.name);
  layout_ = std::make_unique<model::ParamLayout>(config_);
  wanted_ = gguf_tensors(*layout_, config_, arch.name, gguf_has_fused_qkvz(f, arch.name));
  const int64_t mtp = gguf_mtp_layers(f, arch.name);
  const int64_t skipped = check_tensors(f, wanted_, arch.name, mtp > 0 ? config_.n_layers : -1);
  if (mtp > 0)
    skipped_ = cat("left out the ", mtp, " multi-token-prediction block(s) (", skipped, " tensors): gatedlm has no MTP head");
  vocabulary_ = gguf_vocabulary(f, config_.vocab_size);
}

GgufImport::~GgufImport() = default;

model::WeightFormats GgufImport::block_formats() const { return gguf_block_formats(*file_, wanted_); }

void GgufImport::read_weights(std::span<float> params, model::QuantizedWeights* blocks) {
  if (static_cast<int64_t>(params.size()) != layout_->total())
    fail(file_->path(), ": ", params.size(), " values to read into, the model has ", layout_->total());
  read_tensors(*file_, wanted_, params, blocks);
  invert_stored_values(wanted_, params, file_->path());
}

ImportedGguf import_gguf(const std::string& path) {
  GgufImport g(path);
  ImportedGguf out;
  out.architecture = g.architecture();
  out.checkpoint.config = g.config();
  out.tokenizer_json = g.vocabulary().tokenizer_json;
  out.vocabulary = g.vocabulary().description;
  out.byte_tokenizer = g.vocabulary().byte_tokenizer;
  out.skipped = g.skipped();
  out.checkpoint.params.assign(static_cast<size_t>(model::ParamLayout(g.config()).total()), 0.0f);
  g.read_weights(out.checkpoint.params, nullptr);
  return out;
}

bool is_gguf_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

}  // namespace gatedlm::io
