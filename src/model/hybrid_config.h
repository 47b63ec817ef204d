#pragma once
// Hybrid models (Qwen3-Next, Qwen3.5): Gated DeltaNet ("linear attention") layers between
// softmax-attention layers. The keys of config.json that choose them, their checks, and the
// widths they imply:
//
//   layer_types: ["linear_attention" | "full_attention" | "sliding_attention", ...]   (one per
//                layer; sliding_attention: softmax attention over the last sliding_window keys), or
//   full_attention_interval: k     layer l (0-based) is full attention iff (l + 1) % k == 0
//   linear_attention: { n_k_heads, n_v_heads, k_head_dim, v_head_dim, conv_kernel [4],
//                       value_head_order ["grouped"] }
//   norm_zero_centered: false      (in config.h: x * (1 + w) norms, weights initialised at 0)
//
// Neither list nor interval: every layer is full attention (the paper's decoder). The
// linear layer's computation and tensors: model/gated_deltanet.h.
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace gatedlm::model {

enum class LayerKind { full_attention, linear_attention, sliding_attention };

// Which value heads a key head serves (r = n_v / n_k of them), i.e. how the value-head axis of
// every linear-layer tensor is ordered:
//   grouped: key head j serves value heads j*r .. j*r + r-1 (Hugging Face's Qwen3-Next and
//            Qwen3.5, llama.cpp's qwen3next; gatedlm's default);
//   tiled:   key head j serves value heads j, j + n_k, j + 2 n_k, ... (llama.cpp's qwen35 and
//            qwen35moe, whose graph broadcasts the key heads), so that a qwen35 file's tensors
//            load as they are, blocks included. Export to Hugging Face writes grouped.
// With n_v = n_k both orders are the same.
enum class ValueHeadOrder { grouped, tiled };
const char* to_string(ValueHeadOrder order);  // "grouped" / "tiled"

struct LinearAttentionConfig {
  int64_t n_k_heads = 0, n_v_heads = 0, k_head_dim = 0, v_head_dim = 0, conv_kernel = 4;
  ValueHeadOrder value_head_order = ValueHeadOrder::grouped;

  int64_t key_dim() const { return n_k_heads * k_head_dim; }
  int64_t value_dim() const { return n_v_heads * v_head_dim; }
  // Channels of the causal convolution: q | k | v.
  int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }
  // Columns of the fused input product h [n, d] x [in_proj_qkv; in_proj_z; in_proj_b; in_proj_a]^T.
  int64_t in_width() const { return conv_dim() + value_dim() + 2 * n_v_heads; }
  // Value heads served by each key head (r).
  int64_t heads_per_key() const { return n_k_heads > 0 ? n_v_heads / n_k_heads : 0; }
  // The index of key head j's m-th value head (0 <= m < r) in `order`, and in this config's.
  int64_t value_head(int64_t j, int64_t m, ValueHeadOrder order) const {
    return order == ValueHeadOrder::grouped ? j * heads_per_key() + m : m * n_k_heads + j;
  }
  int64_t value_head(int64_t j, int64_t m) const { return value_head(j, m, value_head_order); }
  // Parameters of one linear layer's token mixer (without its norms and FFN).
  int64_t params(int64_t d_model) const {
    return (in_width() + value_dim()) * d_model + conv_dim() * conv_kernel + 2 * n_v_heads + v_head_dim;
  }
};

// The most layers a model may have. Every reader of a config (gatedlm's, Hugging Face's,
// GGUF's) checks n_layers against it before it builds a list of the layers' kinds, so a
// huge count is refused before anything of that size is allocated; validate() checks it
// again for configs made in code.
inline constexpr int64_t kMaxLayers = int64_t{1} << 20;
// Throws "<where>: n_layers must be in 1..1048576, got N" unless 1 <= n_layers <= kMaxLayers.
void check_layer_count(int64_t n_layers, const std::string& where);

// The layer kinds from the config object (layer_types or full_attention_interval, checked
// against n_layers); an empty vector when the object has neither. Messages start with `where`.
std::vector<LayerKind> layer_kinds_from_json(const nlohmann::json& config, int64_t n_layers,
                                             const std::string& where);
LinearAttentionConfig linear_attention_from_json(const nlohmann::json& j, const std::string& where);
nlohmann::json layer_kinds_to_json(const std::vector<LayerKind>& kinds);
nlohmann::json linear_attention_to_json(const LinearAttentionConfig& c);
// Throws gatedlm::Error naming the linear_attention key at fault.
void validate_linear_attention(const LinearAttentionConfig& c);
const char* to_string(LayerKind kind);  // "linear_attention" / "full_attention" / "sliding_attention"

}  // namespace gatedlm::model
