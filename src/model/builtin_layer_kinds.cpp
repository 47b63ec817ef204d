// The built-in layer kinds (layer_kinds.h), in registry order. A new kind adds its row here.
#include "model/layer_kinds.h"
#include "model/mixer_attention.h"
#include "model/mixer_deltanet.h"
#include "model/mixer_sliding.h"

namespace gatedlm::model {

std::vector<LayerKindSpec> builtin_layer_kinds() {
  return {attention_layer_kind(), deltanet_layer_kind(), sliding_attention_layer_kind()};
}

}  // namespace gatedlm::model
