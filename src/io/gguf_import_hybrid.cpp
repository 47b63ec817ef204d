#include "io/gguf_import_hybrid.h"

#include <cmath>
#include <cstdint>

#include "core/error.h"
#include "io/gguf.h"

namespace gatedlm::io {

namespace {

constexpr int64_t kMaxKey = int64_t{1} << 31;
// llama.cpp's qwen35 / qwen3next loaders: full attention every 4th layer unless told.
constexpr int64_t kLlamaDefaultInterval = 4;

int64_t required_int(const GgufReader& f, const std::string& key, int64_t lo) {
  if (!f.has(key)) fail(f.path(), ": missing key ", key);
  return f.get_int(key, lo, kMaxKey);
}

// Layer l is linear attention per attention.recurrent_layers, else iff (l + 1) % k != 0.
std::vector<model::LayerKind> layer_kinds(const GgufReader& f, const std::string& prefix, int64_t n_layers,
                                          int64_t mtp) {
  using model::LayerKind;
  model::check_layer_count(n_layers, cat(f.path(), ": key ", prefix, "block_count asks for ", n_layers, " layers"));
  std::vector<LayerKind> kinds;
  const std::string listed = prefix + "attention.recurrent_layers";
  if (f.has(listed)) {
    const std::vector<int64_t>& flags = f.get_bools(listed);
    if (static_cast<int64_t>(flags.size()) != n_layers && static_cast<int64_t>(flags.size()) != n_layers + mtp)
      fail(f.path(), ": key ", listed, " has ", flags.size(), " flags for ", n_layers, " layers (", prefix, "block_count)");
    for (int64_t l = 0; l < n_layers; ++l)
      kinds.push_back(flags[l] ? LayerKind::linear_attention : LayerKind::full_attention);
  } else {
    const std::string key = prefix + "full_attention_interval";
    const int64_t k = f.has(key) ? f.get_int(key, 1, kMaxKey) : kLlamaDefaultInterval;
    for (int64_t l = 0; l < n_layers; ++l)
      kinds.push_back((l + 1) % k != 0 ? LayerKind::linear_attention : LayerKind::full_attention);
  }
  for (LayerKind k : kinds)
    if (k == LayerKind::linear_attention) return kinds;
  return {};  // every layer full attention: gatedlm's plain decoder
}

// The Gated DeltaNet shape from the ssm.* keys (llama.cpp sizes k and v heads alike).
model::LinearAttentionConfig linear_attention(const GgufReader& f, const std::string& prefix) {
  model::LinearAttentionConfig la;
  la.n_k_heads = required_int(f, prefix + "ssm.group_count", 1);
  la.n_v_heads = required_int(f, prefix + "ssm.time_step_rank", 1);
  la.k_head_dim = la.v_head_dim = required_int(f, prefix + "ssm.state_size", 1);
  la.conv_kernel = required_int(f, prefix + "ssm.conv_kernel", 1);
  const int64_t inner = required_int(f, prefix + "ssm.inner_size", 1);
  if (inner != la.value_dim())
    fail(f.path(), ": key ", prefix, "ssm.inner_size is ", inner, "; llama.cpp's value heads are ssm.time_step_rank (",
         la.n_v_heads, ") heads of ssm.state_size (", la.k_head_dim, ") = ", la.value_dim());
  if (la.n_v_heads % la.n_k_heads != 0)
    fail(f.path(), ": key ", prefix, "ssm.time_step_rank (", la.n_v_heads, ") is not a multiple of ssm.group_count (",
         la.n_k_heads, ")");
  return la;
}

// rope_dims from rope.dimension_count; qwen35's M-RoPE sections must cover every rotated pair
// (pair s reads section s % 3 while s < 3 * sections[s % 3]; text gives all three the position).
int64_t rope_dims(const GgufReader& f, const std::string& prefix, const std::string& arch, int64_t head_dim) {
  const std::string key = prefix + "rope.dimension_count";
  const int64_t dims = f.has(key) ? f.get_int(key, 2, head_dim) : head_dim;
  if (dims % 2 != 0) fail(f.path(), ": key ", key, " is ", dims, ", not even");
  if (!gguf_traits(arch).rope_sections) return dims;  // qwen3next: NeoX's rotate-half RoPE
  const std::string sections_key = prefix + "rope.dimension_sections";
  if (!f.has(sections_key)) fail(f.path(), ": missing key ", sections_key, " (llama.cpp's ", arch, " requires it)");
  const std::vector<int64_t>& sections = f.get_ints(sections_key);
  if (sections.size() < 3) fail(f.path(), ": key ", sections_key, " has ", sections.size(), " values, not 4");
  for (int64_t pair = 0; pair < dims / 2; ++pair)
    if (pair / 3 >= sections[pair % 3])  // pair >= 3 * sections[pair % 3], which may overflow int64
      fail(f.path(), ": key ", sections_key, " leaves rotated pair ", pair, " without a section (llama.cpp would give "
           "it position 0): gatedlm imports text RoPE, where every pair turns with the token's position");
  return dims;
}

// Whether every layer's shared expert is the zero one export writes for a model without one.
bool shared_expert_is_zero(GgufReader& f, int64_t n_layers) {
  std::vector<float> values;
  for (int64_t l = 0; l < n_layers; ++l)
    for (const char* part : {"ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp", "ffn_gate_inp_shexp"}) {
      const GgufTensorInfo* t = f.find_tensor(cat("blk.", l, ".", part, ".weight"));
      if (!t || !readable_as_f32(t->type)) return false;  // refused by name later
      if (std::string(part) == "ffn_up_shexp" && (t->shape.size() != 2 || t->shape[0] != kZeroSharedUnits)) return false;
      values.resize(static_cast<size_t>(t->numel));
      f.read_f32(*t, values.data(), t->numel);
      for (float v : values)
        if (v != 0.0f) return false;
    }
  return true;
}

// The shared expert: expert_shared_feed_forward_length units (else ffn_up_shexp's rows), or
// none for the all-zero one.
void read_shared_expert(GgufReader& f, const std::string& prefix, model::ModelConfig& c) {
  const std::string key = prefix + "expert_shared_feed_forward_length";
  const GgufTensorInfo* up = f.find_tensor("blk.0.ffn_up_shexp.weight");
  if (!f.has(key) && !up) fail(f.path(), ": missing tensor blk.0.ffn_up_shexp.weight (the shared expert)");
  c.moe.n_shared = 1;
  c.moe.shared_hidden = f.has(key) ? f.get_int(key, 1, kMaxKey) : up->shape[0];
  if (c.moe.shared_hidden == kZeroSharedUnits && shared_expert_is_zero(f, c.n_layers)) {
    c.moe.n_shared = 0;
    c.moe.shared_hidden = c.moe.expert_hidden;
  }
}

}  // namespace

std::vector<std::string> gguf_hybrid_keys(const std::string& arch) {
  std::vector<std::string> keys{"rope.dimension_count", "full_attention_interval", "attention.recurrent_layers",
                                "ssm.conv_kernel", "ssm.state_size", "ssm.group_count", "ssm.time_step_rank",
                                "ssm.inner_size", "nextn_predict_layers"};
  if (gguf_traits(arch).rope_sections) keys.push_back("rope.dimension_sections");
  if (gguf_has_shared_expert(arch)) keys.push_back("expert_shared_feed_forward_length");
  return keys;
}

void read_hybrid_config(GgufReader& f, const std::string& arch, model::ModelConfig& c) {
  const std::string prefix = arch + ".";
  // Before a vector of layer kinds is sized by it (every layer has tensors of its own).
  if (c.n_layers > static_cast<int64_t>(f.tensors().size()))
    fail(f.path(), ": key ", prefix, "block_count asks for ", c.n_layers, " layers; the file holds ", f.tensors().size(),
         " tensors");
  const int64_t mtp = gguf_mtp_layers(f, arch);
  if (mtp >= c.n_layers)
    fail(f.path(), ": key ", prefix, "nextn_predict_layers (", mtp, ") leaves none of the ", c.n_layers, " blocks (",
         prefix, "block_count) to the model");
  c.n_layers -= mtp;  // llama.cpp counts the MTP blocks in block_count, after the model's
  c.gate = model::GateConfig{};
  c.gate.position = model::GatePosition::sdpa;  // G1: elementwise sigmoid, reading all of d_model
  c.rope_dims = rope_dims(f, prefix, arch, c.head_dim);
  c.layer_types = layer_kinds(f, prefix, c.n_layers, mtp);
  if (!c.layer_types.empty()) {
    c.linear_attention = linear_attention(f, prefix);
    // qwen35's tiled value heads are kept (io/gguf_linear.h), so its tensors load as they are.
    if (!gguf_traits(arch).grouped_linear_inputs && c.linear_attention.heads_per_key() > 1)
      c.linear_attention.value_head_order = model::ValueHeadOrder::tiled;
  }
  if (gguf_has_shared_expert(arch)) read_shared_expert(f, prefix, c);
}

int64_t gguf_mtp_layers(const GgufReader& f, const std::string& arch) {
  const std::string key = arch + ".nextn_predict_layers";
  return gguf_is_hybrid(arch) && f.has(key) ? f.get_int(key, 0, kMaxKey) : 0;
}

bool gguf_has_fused_qkvz(const GgufReader& f, const std::string& arch) {
  if (!gguf_traits(arch).grouped_linear_inputs) return false;
  const std::string suffix = ".ssm_in.weight";
  for (const GgufTensorInfo& t : f.tensors())
    if (t.name.size() > suffix.size() && t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) == 0)
      return true;
  return false;
}

bool gguf_norm_zero_centered(const GgufReader& f, const std::string& arch) {
  return f.has(kGgufNormZeroCenteredKey) ? f.get_bool(kGgufNormZeroCenteredKey) : gguf_is_hybrid(arch);
}

void invert_stored_values(const std::vector<GgufTensor>& tensors, std::span<float> params, const std::string& path) {
  for (const GgufTensor& t : tensors) {
    if (t.values == GgufValues::as_is) continue;
    for (const GgufRun& run : t.runs) {
      if (!run.spec) continue;
      float* v = params.data() + run.spec->offset + run.begin;
      for (int64_t i = 0; i < run.count; ++i) {
        if (t.values == GgufValues::plus_one) {
          v[i] -= 1.0f;
        } else if (!(v[i] < 0.0f)) {
          fail(path, ": tensor ", t.name, " holds ", v[i], "; llama.cpp's ssm_a is -exp(A_log), always negative");
        } else {
          v[i] = std::log(-v[i]);
        }
      }
    }
  }
}

}  // namespace gatedlm::io
