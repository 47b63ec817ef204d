#pragma once
// The layer kinds: one registry row per kind of token mixer (softmax attention, Gated DeltaNet),
// saying what the rest of the engine may ask of a layer without testing its kind:
//
//   - its parameters (param_layout.cpp asks add_params for the layer's mixer tensors);
//   - its forward and backward (the block loop asks the kind's Mixer, model/mixer.h);
//   - the decode state it keeps per sequence (infer/ allocates a KV cache row or a recurrent
//     state, or nothing, by decode_state);
//   - what its last forward can show the probes (analysis/ asks captures).
//
// A kind's row and its Mixer live in the kind's own files (mixer_attention.cpp,
// mixer_deltanet.cpp); builtin_layer_kinds.cpp lists the built-in rows. docs/architecture.md
// ("Layer kinds") says which files a new kind touches.
#include <cstdint>
#include <vector>

#include "model/hybrid_config.h"

namespace gatedlm::model {

struct ModelConfig;
class LayerParams;
template <typename T>
class Mixer;

// What the incremental path (infer/) keeps per layer and sequence.
enum class DecodeStateKind {
  none,       // nothing: the mixer reads only the current token's row
  kv_cache,   // keys and values of the tokens seen (infer/kv_cache.h); the mixer calls AttentionFn
  recurrent,  // a fixed-size recurrent state (infer/recurrent_state.h); the mixer calls LinearStateFn
};

// What a layer's last forward offers the probes (block_io.h's BlockProbe and Model::attention_probs).
struct LayerCaptures {
  bool attention_probs = false;  // softmax probabilities (Model::attention_probs), q_roped, k_roped
  bool sdpa_output = false;      // sdpa_out and, when the config has a gate, the gate's tensors
  bool recurrent_state = false;  // BlockProbe::linear: the Gated DeltaNet's beta, decay, SiLU(z)
};

struct LayerKindSpec {
  LayerKind kind;
  const char* name;  // the config's layer_types value
  DecodeStateKind decode_state;
  LayerCaptures captures;
  // Adds the mixer's tensors of one layer, in checkpoint order, between the layer's input norm
  // and its post-attention norm (param_layout.cpp).
  void (*add_params)(LayerParams& layer, const ModelConfig& c);
  // The kind's mixer (stateless: one object serves every layer of the kind).
  const Mixer<float>& (*mixer_float)();
  const Mixer<double>& (*mixer_double)();
  // kv_cache kinds whose queries see only the last W keys (sliding windows): W from the
  // config; the decoder keeps W rows per sequence for such layers. Null: every earlier key.
  int64_t (*kv_window)(const ModelConfig& c) = nullptr;
};

// The row of a kind; throws gatedlm::Error naming the kind when none is registered.
const LayerKindSpec& layer_kind_spec(LayerKind kind);
// The row of a model's layer (a config without layer_types: every layer full attention).
const LayerKindSpec& layer_spec(const ModelConfig& c, int64_t layer);
// The keys a query of the layer sees in decode: the last kv_window(c, layer), 0 for all.
int64_t kv_window(const ModelConfig& c, int64_t layer);
// Layers of the model whose kind keeps this decode state / offers this capture.
int64_t count_layers(const ModelConfig& c, DecodeStateKind state);
int64_t count_layers(const ModelConfig& c, bool LayerCaptures::*capture);

// The built-in kinds' rows, in order (builtin_layer_kinds.cpp: the one file that names
// every kind's mixer, so that no kind's files and this registry include each other).
std::vector<LayerKindSpec> builtin_layer_kinds();

// Adds a row (or replaces the row of the same kind). The built-in kinds are registered from
// the start; this is how a kind defined outside model/ (a test's) joins them.
void register_layer_kind(const LayerKindSpec& spec);

}  // namespace gatedlm::model
