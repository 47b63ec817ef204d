"""Hybrid models in the PyTorch reference: Gated DeltaNet ("linear attention") layers beside
the softmax layers, as in Qwen3-Next and Qwen3.5 (issue 23; the contract is the C++ model's).

Written from the Hugging Face description (transformers' models/qwen3_5 and qwen3_next:
Qwen3_5GatedDeltaNet, torch_chunk_gated_delta_rule, Qwen3_5RMSNormGated, Qwen3_5RMSNorm),
not from gatedlm's code. Per linear layer, h = the block's normalised input [B, T, d]:

    mixed = SiLU(causal depthwise conv_K(h W_qkv^T))       channels q | k | v
    q, k  = L2-normalised per key head (rsqrt(sum x^2 + 1e-6)); q /= sqrt(d_k)
    beta  = sigmoid(h W_b^T), g = -exp(A_log) * softplus(h W_a^T + dt_bias)   per value head
    S_t   = exp(g_t) S_{t-1};  S_t += k_t (beta_t (v_t - S_t^T k_t))^T;  o_t = S_t^T q_t
            (key head j serves value heads j*r .. j*r+r-1, r = n_v / n_k: "grouped", as
            Hugging Face; or j, j+n_k, j+2n_k, ..: "tiled", as llama.cpp's qwen35 graph, which
            repeats the key heads by broadcasting; linear_attention.value_head_order)
    y     = RMSNorm(o per head) * norm.weight * SiLU(h W_z^T);  out = y W_out^T

The delta rule is written twice: the plain recurrence and the chunked WY / UT form (Yang et
al., "Gated Delta Networks"), products within chunks, the state carried between them.
reference_model.py calls in here for the config keys, shapes, modules and zero-centred norms;
test_against_engine.py takes ENGINE_CASES; the harnesses use engine_lacks_hybrid to skip.
"""

import dataclasses
import math
import re

import torch
import torch.nn as nn
import torch.nn.functional as F

LAYER_TYPES = ("linear_attention", "full_attention", "sliding_attention")
HYBRID_KEYS = ("layer_types", "full_attention_interval", "linear_attention", "norm_zero_centered", "sliding_window")
L2_EPS = 1e-6            # the L2 normalisation of q and k (as FLA and transformers)
DEFAULT_CHUNK = 64       # transformers' chunk size; the reference's forward uses the chunked form


@dataclasses.dataclass
class LinearAttentionConfig:
    n_k_heads: int
    n_v_heads: int
    k_head_dim: int
    v_head_dim: int
    conv_kernel: int = 4
    value_head_order: str = "grouped"

    @classmethod
    def from_json(cls, d, config_error):
        if not isinstance(d, dict):
            raise config_error(f"linear_attention must be an object, got {d!r}")
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = set(d) - set(known)
        if unknown:
            raise config_error(f"unknown linear_attention keys: {sorted(unknown)}")
        for key in known[:4]:
            if key not in d:
                raise config_error(f"linear_attention: missing required key {key}")
        if d.get("value_head_order", "grouped") not in ("grouped", "tiled"):
            raise config_error(f"linear_attention.value_head_order must be grouped or tiled, "
                               f"got {d['value_head_order']!r}")
        for key, v in d.items():
            if key == "value_head_order":
                continue
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise config_error(f"linear_attention.{key} must be a positive integer, got {v!r}")
        la = cls(**d)
        if la.n_v_heads % la.n_k_heads != 0:
            raise config_error(f"linear_attention.n_v_heads {la.n_v_heads} is not a multiple of "
                               f"n_k_heads {la.n_k_heads}")
        return la

    def to_json(self):
        return dataclasses.asdict(self)

    @property
    def key_dim(self):
        return self.n_k_heads * self.k_head_dim

    @property
    def value_dim(self):
        return self.n_v_heads * self.v_head_dim

    @property
    def conv_dim(self):
        return 2 * self.key_dim + self.value_dim


# ---- config -----------------------------------------------------------------------------

def parse_config_keys(cfg, d, config_error):
    """Reads the hybrid keys of config dict d into cfg (a reference_model.ModelConfig)."""
    if "layer_types" in d:
        lt = d["layer_types"]
        if not isinstance(lt, list) or any(t not in LAYER_TYPES for t in lt):
            raise config_error(f"layer_types must be a list of {'|'.join(LAYER_TYPES)}, got {lt!r}")
        cfg.layer_types = list(lt)
    if "full_attention_interval" in d:
        k = d["full_attention_interval"]
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise config_error(f"full_attention_interval must be an integer >= 1, got {k!r}")
        cfg.full_attention_interval = k
    if "linear_attention" in d:
        cfg.linear_attention = LinearAttentionConfig.from_json(d["linear_attention"], config_error)
    if "norm_zero_centered" in d:
        if not isinstance(d["norm_zero_centered"], bool):
            raise config_error(f"norm_zero_centered must be true/false, got {d['norm_zero_centered']!r}")
        cfg.norm_zero_centered = d["norm_zero_centered"]
    if "sliding_window" in d:
        w = d["sliding_window"]
        if not isinstance(w, int) or isinstance(w, bool) or w < 0:
            raise config_error(f"sliding_window must be an integer >= 0, got {w!r}")
        cfg.sliding_window = w


def layer_window(cfg, i):
    """The keys a query of layer i sees: the last sliding_window for a sliding_attention layer
    (Hugging Face's convention: t - W < j <= t), 0 (all) otherwise."""
    if cfg.layer_types is not None and cfg.layer_types[i] == "sliding_attention":
        return cfg.sliding_window
    return 0


def validate(cfg, config_error):
    if cfg.layer_types is not None and cfg.full_attention_interval is not None:
        raise config_error("give layer_types or full_attention_interval, not both")
    if cfg.layer_types is not None and len(cfg.layer_types) != cfg.n_layers:
        raise config_error(f"layer_types has {len(cfg.layer_types)} entries, n_layers is {cfg.n_layers}")
    if any(is_linear_layer(cfg, i) for i in range(cfg.n_layers)) and cfg.linear_attention is None:
        raise config_error("linear_attention is required when a layer is linear_attention")


def drop_unset_keys(d):
    """to_json: the hybrid keys are written only when set (as the engine writes optional keys)."""
    for key in HYBRID_KEYS:
        if not d.get(key):
            d.pop(key, None)
    return d


def is_linear_layer(cfg, i):
    """Layer i (0-based) is a Gated DeltaNet layer: layer_types[i], or with an interval k
    every layer but those with (i+1) % k == 0 (Qwen3-Next's rule); neither: all softmax."""
    if cfg.layer_types is not None:
        return cfg.layer_types[i] == "linear_attention"
    if cfg.full_attention_interval is not None:
        return (i + 1) % cfg.full_attention_interval != 0
    return False


def is_hybrid(cfg):
    return any(is_linear_layer(cfg, i) for i in range(cfg.n_layers))


def norm_weight(cfg, w):
    """The factor a block RMSNorm multiplies by: 1 + w when zero-centred (weights start at
    0, Qwen3_5RMSNorm), else w. The linear layers' gated norm never goes through here."""
    return 1.0 + w if cfg.norm_zero_centered else w


def parameter_shapes(cfg, prefix):
    """name -> shape of one linear layer's mixer (prefix 'model.layers.{i}.')."""
    la, d = cfg.linear_attention, cfg.d_model
    p = prefix + "linear_attn."
    return {p + "in_proj_qkv.weight": (la.conv_dim, d),
            p + "in_proj_z.weight": (la.value_dim, d),
            p + "in_proj_b.weight": (la.n_v_heads, d),
            p + "in_proj_a.weight": (la.n_v_heads, d),
            p + "conv1d.weight": (la.conv_dim, 1, la.conv_kernel),
            p + "dt_bias": (la.n_v_heads,),
            p + "A_log": (la.n_v_heads,),
            p + "norm.weight": (la.v_head_dim,),
            p + "out_proj.weight": (d, la.value_dim)}


# ---- the delta rule ---------------------------------------------------------------------

def _value_heads(q, k, n_v):
    """Repeats key heads to value heads: key head j serves value heads j*r .. j*r+r-1."""
    r = n_v // q.shape[2]
    return q.repeat_interleave(r, dim=2), k.repeat_interleave(r, dim=2)


def delta_rule_recurrent(q, k, v, g, beta, state=None):
    """The gated delta rule token by token.

    q, k [B, T, n_k, d_k] (normalised and scaled already); v [B, T, n_v, d_v];
    g, beta [B, T, n_v]; state [B, n_v, d_k, d_v] or None (zeros).
    Returns (o [B, T, n_v, d_v], final state [B, n_v, d_k, d_v]).
    """
    q, k = _value_heads(q, k, v.shape[2])
    B, T, H, dk = k.shape
    S = v.new_zeros(B, H, dk, v.shape[-1]) if state is None else state
    outs = []
    for t in range(T):
        S = S * torch.exp(g[:, t])[..., None, None]
        k_t = k[:, t]
        predicted = torch.einsum("bhk,bhkv->bhv", k_t, S)              # S^T k
        u = beta[:, t, :, None] * (v[:, t] - predicted)
        S = S + k_t[..., :, None] * u[..., None, :]
        outs.append(torch.einsum("bhk,bhkv->bhv", q[:, t], S))         # S^T q
    return torch.stack(outs, dim=1), S


def _to_chunks(x, C, pad):
    """[B, T, H, ...] -> [B, H, n_chunks, C, ...], zero-padded at the end."""
    x = x.transpose(1, 2)
    x = F.pad(x, (0, 0, 0, pad)) if x.dim() == 4 else F.pad(x, (0, pad))
    return x.reshape(x.shape[0], x.shape[1], -1, C, *x.shape[3:])


def delta_rule_chunked(q, k, v, g, beta, chunk_size=DEFAULT_CHUNK, state=None):
    """The same rule in chunks of C tokens (same arguments and results as the recurrence).

    Within a chunk, with gamma_i = g_1 + .. + g_i and D_ij = exp(gamma_i - gamma_j) (j <= i),
    the corrections u_i = beta_i (v_i - S_{i-1}'^T k_i) solve the unit lower-triangular system
        (I + A) U = beta V - (beta exp(gamma) K) S_0,   A_ij = beta_i (k_i . k_j) D_ij (j < i)
    (the UT transform), and then
        O   = (exp(gamma) Q) S_0 + ((Q K^T) * D) U
        S_C = exp(gamma_C) S_0 + (exp(gamma_C - gamma) K)^T U.
    Padding tokens have k = v = 0, beta = 0 and g = 0: they change neither outputs nor state.
    """
    q, k = _value_heads(q, k, v.shape[2])
    B, T, H, dk = k.shape
    C = chunk_size
    pad = (-T) % C
    q, k, v, g, beta = (_to_chunks(x, C, pad) for x in (q, k, v, g, beta))
    gamma = g.cumsum(dim=-1)                                            # [B, H, n, C]
    lower = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()
    decay = torch.exp((gamma[..., :, None] - gamma[..., None, :]).masked_fill(~lower, -math.inf))
    eye = torch.eye(C, dtype=q.dtype, device=q.device)
    system = eye + (beta[..., None] * (k @ k.transpose(-1, -2)) * decay).tril(-1)
    w_v = torch.linalg.solve_triangular(system, beta[..., None] * v, upper=False, unitriangular=True)
    w_k = torch.linalg.solve_triangular(system, (beta * torch.exp(gamma))[..., None] * k,
                                        upper=False, unitriangular=True)
    intra = (q @ k.transpose(-1, -2)) * decay                          # [B, H, n, C, C]
    q_decayed = q * torch.exp(gamma)[..., None]
    k_to_end = k * torch.exp(gamma[..., -1:] - gamma)[..., None]
    S = v.new_zeros(B, H, dk, v.shape[-1]) if state is None else state
    outs = []
    for c in range(gamma.shape[2]):
        u = w_v[:, :, c] - w_k[:, :, c] @ S                             # [B, H, C, d_v]
        outs.append(q_decayed[:, :, c] @ S + intra[:, :, c] @ u)
        S = S * torch.exp(gamma[:, :, c, -1])[..., None, None] + k_to_end[:, :, c].transpose(-1, -2) @ u
    o = torch.stack(outs, dim=2).reshape(B, H, -1, v.shape[-1])[:, :, :T]
    return o.transpose(1, 2), S


def delta_rule(q, k, v, g, beta, chunk_size=DEFAULT_CHUNK, state=None):
    """Chunked with chunk_size, or the recurrence when chunk_size is None."""
    if chunk_size is None:
        return delta_rule_recurrent(q, k, v, g, beta, state)
    return delta_rule_chunked(q, k, v, g, beta, chunk_size, state)


# ---- the layer --------------------------------------------------------------------------

def l2_normalize(x):
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + L2_EPS)


def causal_depthwise_conv(x, w):
    """x [B, T, C], w [C, 1, K]: c_t = sum_j w[c, 0, j] x_{t-(K-1)+j} (zeros before t = 0)."""
    K, T = w.shape[-1], x.shape[1]
    return F.conv1d(x.transpose(1, 2), w, padding=K - 1, groups=x.shape[-1])[..., :T].transpose(1, 2)


class GatedDeltaNet(nn.Module):
    """The mixer of a linear layer (checkpoint names model.layers.{i}.linear_attn.*)."""

    def __init__(self, cfg, weight_cls, device=None):
        super().__init__()
        self.cfg = cfg
        la, d = cfg.linear_attention, cfg.d_model
        self.in_proj_qkv = weight_cls(la.conv_dim, d, device=device)
        self.in_proj_z = weight_cls(la.value_dim, d, device=device)
        self.in_proj_b = weight_cls(la.n_v_heads, d, device=device)
        self.in_proj_a = weight_cls(la.n_v_heads, d, device=device)
        self.conv1d = weight_cls(la.conv_dim, 1, la.conv_kernel, device=device)
        self.dt_bias = nn.Parameter(torch.empty(la.n_v_heads, device=device))
        self.A_log = nn.Parameter(torch.empty(la.n_v_heads, device=device))
        self.norm = weight_cls(la.v_head_dim, device=device)
        self.out_proj = weight_cls(d, la.value_dim, device=device)
        self.chunk_size = DEFAULT_CHUNK   # None: the plain recurrence

    def forward(self, h, trace=None, prefix=""):
        """h [B, T, d] (the block's normalised input) -> [B, T, d]."""
        la, B, T = self.cfg.linear_attention, h.shape[0], h.shape[1]
        mixed = F.silu(causal_depthwise_conv(self.in_proj_qkv.linear(h), self.conv1d.weight))
        q, k, v = torch.split(mixed, [la.key_dim, la.key_dim, la.value_dim], dim=-1)
        q = l2_normalize(q.reshape(B, T, la.n_k_heads, la.k_head_dim)) / math.sqrt(la.k_head_dim)
        k = l2_normalize(k.reshape(B, T, la.n_k_heads, la.k_head_dim))
        if la.value_head_order == "tiled":   # value head t reads key head t % n_k
            r = la.n_v_heads // la.n_k_heads
            q, k = q.repeat(1, 1, r, 1), k.repeat(1, 1, r, 1)
        v = v.reshape(B, T, la.n_v_heads, la.v_head_dim)
        beta = torch.sigmoid(self.in_proj_b.linear(h))
        g = -torch.exp(self.A_log) * F.softplus(self.in_proj_a.linear(h) + self.dt_bias)
        o, _ = delta_rule(q, k, v, g, beta, self.chunk_size)
        z = self.in_proj_z.linear(h).reshape(B, T, la.n_v_heads, la.v_head_dim)
        o_hat = o * torch.rsqrt(o.pow(2).mean(dim=-1, keepdim=True) + self.cfg.norm_eps)
        y = o_hat * self.norm.weight * F.silu(z)                        # the gated RMSNorm
        if trace is not None:
            trace[prefix + "linear_beta"] = beta.detach()
            trace[prefix + "linear_decay"] = torch.exp(g).detach()
        return self.out_proj.linear(y.reshape(B, T, la.value_dim))


def set_chunk_size(model, chunk_size):
    """Every linear layer of a GatedLM uses chunk_size (None: the recurrence)."""
    for mod in model.modules():
        if isinstance(mod, GatedDeltaNet):
            mod.chunk_size = chunk_size


def init_parameter(name, p, generator=None):
    """Default init of a linear layer's vectors (Hugging Face Qwen3.5's): dt_bias 1,
    A = exp(A_log) uniform in [0.01, 16], the gated norm's weight 1. False for other names."""
    if name.endswith("linear_attn.dt_bias") or name.endswith("linear_attn.norm.weight"):
        p.fill_(1.0)
    elif name.endswith("linear_attn.A_log"):
        p.copy_(torch.empty_like(p).uniform_(0.01, 16.0, generator=generator).log())
    else:
        return False
    return True


def is_block_norm(name):
    """A block RMSNorm weight (zero-centred when configured): every '*norm.weight' vector
    except the linear layers' gated norm."""
    return name.endswith("norm.weight") and ".linear_attn." not in name


# ---- test weights and cases -------------------------------------------------------------

def randomize_for_tests(model, gen):
    """After a harness's random weights: decays exp(g) mostly in 0.5 .. 0.95 (A_log ~
    N(-2, 0.5), dt_bias ~ N(0, 0.5)), so the state carries over many tokens; zero-centred
    norm weights N(0, 0.1) around 0. Draws nothing for other models."""
    cfg = model.cfg
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("linear_attn.A_log"):
                p.copy_(-2.0 + 0.5 * torch.randn(p.shape, generator=gen))
            elif name.endswith("linear_attn.dt_bias"):
                p.copy_(0.5 * torch.randn(p.shape, generator=gen))
            elif cfg.norm_zero_centered and is_block_norm(name):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))


def _linear(n_k, n_v, d_k=8, d_v=8, conv=4, order="grouped"):
    return {"n_k_heads": n_k, "n_v_heads": n_v, "k_head_dim": d_k, "v_head_dim": d_v, "conv_kernel": conv,
            "value_head_order": order}


# Added to test_against_engine.CASES (and so to the decode check). "__seq__": the sequence
# length when not the harness's 12 (with max_seq_len raised to fit).
ENGINE_CASES = {
    # (a) 3 linear : 1 full, G1 gate on the softmax layer, n_v = n_k
    "hybrid_3to1_g1": dict(n_layers=4, full_attention_interval=4, linear_attention=_linear(2, 2),
                           gate={"position": "sdpa"}),
    # (b) n_v = 2 n_k (and d_v != d_k), zero-centred norms, rope_dims = head_dim/4, no gate
    "hybrid_nv2nk_zero_norm": dict(n_layers=3, layer_types=["linear_attention", "full_attention",
                                                                "linear_attention"],
                                       linear_attention=_linear(2, 4, d_k=8, d_v=6),
                                       norm_zero_centered=True, rope_dims=2, rope_base=100.0),
    # n_v = 3 n_k in llama.cpp's tiled order (key head j serves value heads j, j + 2, j + 4)
    "hybrid_tiled_value_heads": dict(n_layers=2, full_attention_interval=2,
                                     linear_attention=_linear(2, 6, d_k=8, d_v=4, order="tiled"),
                                     gate={"position": "sdpa"}),
    # learned sink logits on the softmax layer of a hybrid, with the G1 gate
    "hybrid_sinks_g1": dict(n_layers=2, full_attention_interval=2, linear_attention=_linear(2, 2),
                            gate={"position": "sdpa"}, attention_sinks=True),
    # (c) MoE FFN in every layer of a hybrid
    "hybrid_moe": dict(n_layers=2, full_attention_interval=2, linear_attention=_linear(2, 2, conv=3),
                       gate={"position": "sdpa"},
                       moe={"n_experts": 4, "top_k": 2, "expert_hidden": 12, "n_shared": 1,
                            "shared_hidden": 8, "lb_coef": 0.1, "z_coef": 0.01}),
    # (d) 100 tokens: more than one 64-token chunk, not a multiple of it
    "hybrid_seq100": dict(__seq__=100, max_seq_len=128, n_layers=4, full_attention_interval=4,
                          linear_attention=_linear(1, 2, d_k=8, d_v=8), gate={"position": "sdpa"}),
    # other softmax variants beside linear layers: headwise value gate, tied, a 2-tap conv
    "hybrid_tied_value_gate": dict(n_layers=3, layer_types=["full_attention", "linear_attention",
                                                                "linear_attention"],
                                       linear_attention=_linear(4, 4, d_k=4, d_v=8, conv=2),
                                       tie_embeddings=True, n_kv_heads=1,
                                       gate={"position": "value", "granularity": "headwise"}),
}


_UNKNOWN_KEY = re.compile(r'unknown key "(' + "|".join(HYBRID_KEYS) + r')"')


def engine_lacks_hybrid(engine_output):
    """The hybrid key the engine rejected as unknown (it does not have hybrids yet), or None."""
    m = _UNKNOWN_KEY.search(engine_output or "")
    return m.group(1) if m else None


# ---- an independent loop-based numpy version (the self-test's naive forward) -------------

def naive_mixer(cfg, P, prefix, h):
    """One linear layer's mixer output [T, d] for one sequence h [T, d] in float64 numpy,
    token by token and head by head; P maps checkpoint names to numpy arrays."""
    import numpy as np
    la, T, eps = cfg.linear_attention, h.shape[0], cfg.norm_eps
    W = {n: P[prefix + "linear_attn." + n] for n in
         ("in_proj_qkv.weight", "in_proj_z.weight", "in_proj_b.weight", "in_proj_a.weight",
          "conv1d.weight", "dt_bias", "A_log", "norm.weight", "out_proj.weight")}
    sigmoid = lambda x: 1.0 / (1.0 + np.exp(-x))  # noqa: E731
    pre = h @ W["in_proj_qkv.weight"].T
    K = la.conv_kernel
    conv = np.zeros_like(pre)
    for t in range(T):
        for j in range(K):
            if t - (K - 1) + j >= 0:
                conv[t] += W["conv1d.weight"][:, 0, j] * pre[t - (K - 1) + j]
    act = conv * sigmoid(conv)
    dk, dv, r = la.k_head_dim, la.v_head_dim, la.n_v_heads // la.n_k_heads
    z = h @ W["in_proj_z.weight"].T
    beta = sigmoid(h @ W["in_proj_b.weight"].T)
    decay = np.exp(-np.exp(W["A_log"]) * np.log1p(np.exp(h @ W["in_proj_a.weight"].T + W["dt_bias"])))
    y = np.zeros((T, la.value_dim))
    for hv in range(la.n_v_heads):
        hk = hv % la.n_k_heads if la.value_head_order == "tiled" else hv // r
        S = np.zeros((dk, dv))
        for t in range(T):
            q = act[t, hk * dk:(hk + 1) * dk]
            k = act[t, la.key_dim + hk * dk:la.key_dim + (hk + 1) * dk]
            v = act[t, 2 * la.key_dim + hv * dv:2 * la.key_dim + (hv + 1) * dv]
            q = q / np.sqrt(q @ q + L2_EPS) / math.sqrt(dk)
            k = k / np.sqrt(k @ k + L2_EPS)
            S = decay[t, hv] * S
            S = S + np.outer(k, beta[t, hv] * (v - S.T @ k))
            o = S.T @ q
            gate = z[t, hv * dv:(hv + 1) * dv]
            y[t, hv * dv:(hv + 1) * dv] = (o / np.sqrt(np.mean(o * o) + eps) * W["norm.weight"]
                                           * gate * sigmoid(gate))
    return y @ W["out_proj.weight"].T


def naive_norm_weights(cfg, P):
    """P with every block norm weight w replaced by 1 + w when zero-centred (numpy)."""
    if not cfg.norm_zero_centered:
        return P
    return {n: (1.0 + w if is_block_norm(n) else w) for n, w in P.items()}
