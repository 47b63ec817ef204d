#pragma once
// Seconds a Gated DeltaNet layer spent in each of its parts (model/gated_deltanet.h), apart
// from the layer's declarations so that the layer's private parts header
// (gated_deltanet_parts.h) needs no more of it.

namespace gatedlm::model {

// Seconds spent in a layer's parts (forward and backward) since the caller last reset them:
// products = in_proj and out_proj; delta_rule = the chunked delta-rule kernels; elementwise =
// the rest (convolution, SiLU, L2 norms, gates, the gated RMSNorm). Their sum is the token
// mixer's time. `gatedlm bench train` reports them (Model::deltanet_times).
struct DeltaNetTimes {
  double products = 0, delta_rule = 0, elementwise = 0;
};

}  // namespace gatedlm::model
