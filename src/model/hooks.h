#pragma once
// Activation hooks: named points of a training-shaped forward (Model::forward) where a caller
// reads the tensor the forward goes on with, or changes it in place, and where Model::backward
// reports the gradient of the loss (or of a seeded logit) with respect to it. TransformerLens's
// names (blocks.{l}.hook_resid_pre, blocks.{l}.attn.hook_z, ...), listed with their shapes in
// docs/python.md. With no hooks set (the default) the forward and backward pay one null test
// per point; incremental passes (forward_tokens) never call hooks.
//
// A change made by a forward hook is what every later part of the forward reads, and what the
// backward reads where it reads that tensor; the backward passes gradients through a hook as
// if it were the identity (a patched value's gradient flows on to what produced the original).
// Two points change what the attention kernels saved for the backward: a forward whose
// hook_pattern or hook_z changed its tensor refuses a backward (Model::backward says which).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/config.h"

namespace gatedlm::model {

enum class HookPoint : uint8_t {
  resid_pre,      // blocks.{l}.hook_resid_pre        [B, S, d]        the block's input
  attn_q,         // blocks.{l}.attn.hook_q           [B, S, H, hd]    after QK-norm and RoPE
  attn_k,         // blocks.{l}.attn.hook_k           [B, S, Hkv, hd]  after QK-norm and RoPE
  attn_v,         // blocks.{l}.attn.hook_v           [B, S, Hkv, hd]  after the value gate, if any
  attn_gate,      // blocks.{l}.attn.hook_gate        [B, S, width]    the gate score of each element
  attn_pattern,   // blocks.{l}.attn.hook_pattern     [B, H, S, S]     the attention probabilities
  attn_z,         // blocks.{l}.attn.hook_z           [B, S, H, hd]    the SDPA output per head (Y)
  attn_gated,     // blocks.{l}.attn.hook_gated       [B, S, width]    the gate's output
  lin_beta,       // blocks.{l}.linear_attn.hook_beta      [B, S, Hv]   write strength sigmoid(b)
  lin_decay,      // blocks.{l}.linear_attn.hook_decay     [B, S, Hv]   log decay g (<= 0)
  lin_out_gate,   // blocks.{l}.linear_attn.hook_out_gate  [B, S, Hv, dv] SiLU(z)
  lin_state,      // blocks.{l}.linear_attn.hook_state     [B, Hv, dk, dv] the state after the last token (read only)
  attn_out,       // blocks.{l}.hook_attn_out         [B, S, d]        the token mixer's output (every kind)
  resid_mid,      // blocks.{l}.hook_resid_mid        [B, S, d]        after the mixer's residual add
  mlp_router,     // blocks.{l}.mlp.hook_router       [B, S, E]        MoE router logits (before softmax, top-k)
  mlp_pre,        // blocks.{l}.mlp.hook_pre          [B, S, 2 f]      gate_proj | up_proj outputs (dense FFN)
  mlp_post,       // blocks.{l}.mlp.hook_post         [B, S, f]        SwiGLU output (dense FFN)
  mlp_out,        // blocks.{l}.hook_mlp_out          [B, S, d]        the FFN's (or MoE block's) output
  resid_post,     // blocks.{l}.hook_resid_post       [B, S, d]        the block's output
  logits,         // hook_logits                      [B, S, vocab]
};

// A point of one layer (layer -1 for the model's own points: hook_logits).
struct HookSite {
  int64_t layer = -1;
  HookPoint point = HookPoint::logits;
  bool operator==(const HookSite&) const = default;
};

// A tensor at a hook: row-major values of `shape`.
template <typename T>
struct HookTensor {
  T* data;
  std::vector<int64_t> shape;
  int64_t size() const;
};

template <typename T>
class ActivationHooks {
 public:
  virtual ~ActivationHooks() = default;
  // Whether forward() wants this point (asked once per point and forward).
  virtual bool wants(const HookSite& site) const = 0;
  // The tensor at the point; may change its values in place. May throw (the forward stops).
  virtual void forward(const HookSite& site, const HookTensor<T>& t) = 0;
  // Whether backward() reports the gradient at this point, and the gradient itself.
  virtual bool wants_gradient(const HookSite&) const { return false; }
  virtual void gradient(const HookSite&, const HookTensor<const T>&) {}
};

// "blocks.3.attn.hook_z", "hook_logits".
std::string hook_name(const HookSite& site);
// The site of a name this model has (the aliases blocks.{l}.attn.hook_attn_out,
// blocks.{l}.linear_attn.hook_out and blocks.{l}.mlp.hook_out are taken too); nullopt for a
// name it does not have.
std::optional<HookSite> parse_hook_name(std::string_view name, const ModelConfig& c);
// Every point of this model, in the order a forward reaches them.
std::vector<HookSite> hook_sites(const ModelConfig& c);
// Whether backward reports the point's gradient (the residual stream, the mixers' and FFNs'
// outputs, q, k, v, z and the logits).
bool hook_has_gradient(HookPoint p);

// The hooks of one pass as the forward's parts call them: the rows are [batch, seq] tokens.
template <typename T>
struct HookCaller {
  ActivationHooks<T>* hooks = nullptr;  // null: every call is a no-op
  int64_t batch = 0, seq = 0;
  bool wants(int64_t layer, HookPoint p) const { return hooks && hooks->wants({layer, p}); }
  bool wants_gradient(int64_t layer, HookPoint p) const { return hooks && hooks->wants_gradient({layer, p}); }
  // Calls the forward hook on data [batch, seq, inner...] when it is wanted; returns whether it was.
  bool forward(int64_t layer, HookPoint p, T* data, std::initializer_list<int64_t> inner) const;
  // The same with a shape of the caller's (hook_pattern's [B, H, S, S], hook_state's).
  bool forward_shaped(int64_t layer, HookPoint p, T* data, std::vector<int64_t> shape) const;
  // Reports the gradient d [batch, seq, inner...] when it is wanted.
  void gradient(int64_t layer, HookPoint p, const T* d, std::initializer_list<int64_t> inner) const;
};

}  // namespace gatedlm::model
