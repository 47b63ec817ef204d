// Hook names and sites (hooks.h): which points a model has, by what each layer's kind
// captures (layer_kinds.h), and the calls the forward's parts make.
#include "model/hooks.h"

#include <charconv>

#include "core/error.h"
#include "model/layer_kinds.h"

namespace gatedlm::model {

namespace {

struct PointName {
  HookPoint point;
  const char* suffix;  // after "blocks.{l}." (hook_logits: the whole name)
};

// The canonical name of each point, in HookPoint's order.
constexpr PointName kNames[] = {
    {HookPoint::resid_pre, "hook_resid_pre"},
    {HookPoint::attn_q, "attn.hook_q"},
    {HookPoint::attn_k, "attn.hook_k"},
    {HookPoint::attn_v, "attn.hook_v"},
    {HookPoint::attn_gate, "attn.hook_gate"},
    {HookPoint::attn_pattern, "attn.hook_pattern"},
    {HookPoint::attn_z, "attn.hook_z"},
    {HookPoint::attn_gated, "attn.hook_gated"},
    {HookPoint::lin_beta, "linear_attn.hook_beta"},
    {HookPoint::lin_decay, "linear_attn.hook_decay"},
    {HookPoint::lin_out_gate, "linear_attn.hook_out_gate"},
    {HookPoint::lin_state, "linear_attn.hook_state"},
    {HookPoint::attn_out, "hook_attn_out"},
    {HookPoint::resid_mid, "hook_resid_mid"},
    {HookPoint::mlp_router, "mlp.hook_router"},
    {HookPoint::mlp_pre, "mlp.hook_pre"},
    {HookPoint::mlp_post, "mlp.hook_post"},
    {HookPoint::mlp_out, "hook_mlp_out"},
    {HookPoint::resid_post, "hook_resid_post"},
    {HookPoint::logits, "hook_logits"},
};

// Other names of the same points (the spelling beside TransformerLens's).
constexpr PointName kAliases[] = {
    {HookPoint::attn_out, "attn.hook_attn_out"},
    {HookPoint::attn_out, "linear_attn.hook_out"},
    {HookPoint::mlp_out, "mlp.hook_out"},
};

const char* suffix_of(HookPoint p) {
  for (const PointName& n : kNames)
    if (n.point == p) return n.suffix;
  fail("internal error: a hook point without a name");
}

bool is_attention_point(HookPoint p) { return p >= HookPoint::attn_q && p <= HookPoint::attn_gated; }
bool is_linear_point(HookPoint p) { return p >= HookPoint::lin_beta && p <= HookPoint::lin_state; }

// Whether layer l of the model has point p.
bool layer_has(const ModelConfig& c, int64_t l, HookPoint p) {
  const LayerCaptures& caps = layer_spec(c, l).captures;
  if (is_attention_point(p)) {
    if (!caps.sdpa_output) return false;
    return c.has_gate() || (p != HookPoint::attn_gate && p != HookPoint::attn_gated);
  }
  if (is_linear_point(p)) return caps.recurrent_state;
  if (p == HookPoint::mlp_pre || p == HookPoint::mlp_post) return !c.moe.is_moe_layer(l);
  if (p == HookPoint::mlp_router) return c.moe.is_moe_layer(l);
  return p != HookPoint::logits;
}

}  // namespace

template <typename T>
int64_t HookTensor<T>::size() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

std::string hook_name(const HookSite& s) {
  if (s.point == HookPoint::logits) return "hook_logits";
  return cat("blocks.", s.layer, ".", suffix_of(s.point));
}

std::optional<HookSite> parse_hook_name(std::string_view name, const ModelConfig& c) {
  if (name == "hook_logits") return HookSite{-1, HookPoint::logits};
  constexpr std::string_view prefix = "blocks.";
  if (!name.starts_with(prefix)) return std::nullopt;
  name.remove_prefix(prefix.size());
  int64_t layer = -1;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), layer);
  if (ec != std::errc{} || end == name.data() || *end != '.' || layer < 0 || layer >= c.n_layers) return std::nullopt;
  if (name.front() == '0' && end - name.data() > 1) return std::nullopt;  // no leading zeros
  const std::string_view suffix = name.substr(end - name.data() + 1);
  auto match = [&](const PointName& n) -> std::optional<HookSite> {
    if (suffix == n.suffix && n.point != HookPoint::logits && layer_has(c, layer, n.point))
      return HookSite{layer, n.point};
    return std::nullopt;
  };
  for (const PointName& n : kNames)
    if (auto s = match(n)) return s;
  for (const PointName& n : kAliases)
    if (auto s = match(n)) return s;
  return std::nullopt;
}

std::vector<HookSite> hook_sites(const ModelConfig& c) {
  std::vector<HookSite> out;
  for (int64_t l = 0; l < c.n_layers; ++l)
    for (const PointName& n : kNames)
      if (layer_has(c, l, n.point)) out.push_back({l, n.point});
  out.push_back({-1, HookPoint::logits});
  return out;
}

bool hook_has_gradient(HookPoint p) {
  switch (p) {
    case HookPoint::resid_pre:
    case HookPoint::attn_q:
    case HookPoint::attn_k:
    case HookPoint::attn_v:
    case HookPoint::attn_z:
    case HookPoint::attn_out:
    case HookPoint::resid_mid:
    case HookPoint::mlp_out:
    case HookPoint::resid_post:
    case HookPoint::logits: return true;
    default: return false;
  }
}

template <typename T>
bool HookCaller<T>::forward(int64_t layer, HookPoint p, T* data, std::initializer_list<int64_t> inner) const {
  if (!wants(layer, p)) return false;
  std::vector<int64_t> shape{batch, seq};
  shape.insert(shape.end(), inner.begin(), inner.end());
  hooks->forward({layer, p}, HookTensor<T>{data, std::move(shape)});
  return true;
}

template <typename T>
bool HookCaller<T>::forward_shaped(int64_t layer, HookPoint p, T* data, std::vector<int64_t> shape) const {
  if (!wants(layer, p)) return false;
  hooks->forward({layer, p}, HookTensor<T>{data, std::move(shape)});
  return true;
}

template <typename T>
void HookCaller<T>::gradient(int64_t layer, HookPoint p, const T* d, std::initializer_list<int64_t> inner) const {
  if (!wants_gradient(layer, p)) return;
  std::vector<int64_t> shape{batch, seq};
  shape.insert(shape.end(), inner.begin(), inner.end());
  hooks->gradient({layer, p}, HookTensor<const T>{d, std::move(shape)});
}

template struct HookTensor<float>;
template struct HookTensor<double>;
template struct HookTensor<const float>;
template struct HookTensor<const double>;
template struct HookCaller<float>;
template struct HookCaller<double>;

}  // namespace gatedlm::model
