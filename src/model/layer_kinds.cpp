#include "model/layer_kinds.h"

#include <vector>

#include "core/error.h"
#include "model/config.h"

namespace gatedlm::model {

namespace {

// The registered rows: the built-in kinds first, then any register_layer_kind added.
std::vector<LayerKindSpec>& rows() {
  static std::vector<LayerKindSpec> all = builtin_layer_kinds();
  return all;
}

}  // namespace

const LayerKindSpec& layer_kind_spec(LayerKind kind) {
  for (const LayerKindSpec& row : rows())
    if (row.kind == kind) return row;
  fail("internal error: no mixer is registered for layer kind ", static_cast<int>(kind));
}

const LayerKindSpec& layer_spec(const ModelConfig& c, int64_t layer) {
  if (layer < 0 || layer >= c.n_layers) fail("internal error: no layer ", layer, " of ", c.n_layers);
  return layer_kind_spec(c.layer_types.empty() ? LayerKind::full_attention : c.layer_types[layer]);
}

int64_t kv_window(const ModelConfig& c, int64_t layer) {
  const LayerKindSpec& spec = layer_spec(c, layer);
  return spec.kv_window ? spec.kv_window(c) : 0;
}

int64_t count_layers(const ModelConfig& c, DecodeStateKind state) {
  int64_t n = 0;
  for (int64_t l = 0; l < c.n_layers; ++l) n += layer_spec(c, l).decode_state == state;
  return n;
}

int64_t count_layers(const ModelConfig& c, bool LayerCaptures::*capture) {
  int64_t n = 0;
  for (int64_t l = 0; l < c.n_layers; ++l) n += layer_spec(c, l).captures.*capture;
  return n;
}

void register_layer_kind(const LayerKindSpec& spec) {
  for (LayerKindSpec& row : rows())
    if (row.kind == spec.kind) {
      row = spec;
      return;
    }
  rows().push_back(spec);
}

}  // namespace gatedlm::model
