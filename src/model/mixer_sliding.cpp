// Sliding-window attention's registry row (mixer_sliding.h): attention's row with its own
// kind, name, mixer and the window its decode cache keeps.
#include "model/mixer_sliding.h"

#include "model/config.h"

namespace gatedlm::model {

namespace {

const Mixer<float>& sliding_mixer_float() {
  static const SlidingAttentionMixer<float> mixer;
  return mixer;
}
const Mixer<double>& sliding_mixer_double() {
  static const SlidingAttentionMixer<double> mixer;
  return mixer;
}

}  // namespace

LayerKindSpec sliding_attention_layer_kind() {
  LayerKindSpec row = attention_layer_kind();
  row.kind = LayerKind::sliding_attention;
  row.name = "sliding_attention";
  row.mixer_float = sliding_mixer_float;
  row.mixer_double = sliding_mixer_double;
  row.kv_window = [](const ModelConfig& c) { return c.sliding_window; };
  return row;
}

template class SlidingAttentionMixer<float>;
template class SlidingAttentionMixer<double>;

}  // namespace gatedlm::model
