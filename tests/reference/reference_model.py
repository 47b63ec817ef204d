"""PyTorch reference of the gatedlm decoder (Qwen3-style, with the gated-attention variants).

This is the ground truth the C++ engine is checked against (tests/reference/test_against_engine.py).
It favours plainness over speed. Parameter names are exactly the checkpoint names, so
`dict(model.named_parameters())` is the checkpoint layout.

The model is dtype-agnostic: build it, then `.to(torch.float64)` to evaluate in float64.
"""

import copy
import dataclasses
import math
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

import hybrid_reference as hyb
import switch_heads_reference as swr
from moe_reference import MoeConfig, MoeMLP, aux_loss, moe_shapes

GATE_POSITIONS = ("none", "sdpa", "value", "key", "query", "dense")
GATE_GRANULARITIES = ("elementwise", "headwise")
GATE_COMBINES = ("multiply", "add")
GATE_ACTIVATIONS = ("sigmoid", "silu", "ns_sigmoid", "identity")
GATE_INPUTS = ("hidden", "constant")
GATE_INITS = ("normal", "zero")
SDPA_TRANSFORMS = ("none", "rmsnorm", "silu")
ROPE_SCALINGS = ("none", "linear", "ntk", "yarn")


class ConfigError(ValueError):
    pass


def _check_int(name, v, lo=None):
    if not isinstance(v, int) or isinstance(v, bool):
        raise ConfigError(f"{name} must be an integer, got {v!r}")
    if lo is not None and v < lo:
        raise ConfigError(f"{name} must be >= {lo}, got {v}")
    return v


def _check_num(name, v):
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        raise ConfigError(f"{name} must be a number, got {v!r}")
    return float(v)


def _check_bool(name, v):
    if not isinstance(v, bool):
        raise ConfigError(f"{name} must be true/false, got {v!r}")
    return v


def _check_enum(name, v, allowed):
    if v not in allowed:
        raise ConfigError(f"{name} must be one of {'|'.join(allowed)}, got {v!r}")
    return v


@dataclasses.dataclass
class GateConfig:
    position: str = "none"
    granularity: str = "elementwise"
    head_shared: bool = False
    combine: str = "multiply"
    activation: str = "sigmoid"
    input: str = "hidden"
    input_dims: int = 0          # 0 = all of d_model
    init: str = "normal"

    @classmethod
    def from_json(cls, d):
        if not isinstance(d, dict):
            raise ConfigError(f"gate must be an object, got {d!r}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ConfigError(f"unknown gate keys: {sorted(unknown)}")
        g = cls()
        if "position" in d:
            g.position = _check_enum("gate.position", d["position"], GATE_POSITIONS)
        if "granularity" in d:
            g.granularity = _check_enum("gate.granularity", d["granularity"], GATE_GRANULARITIES)
        if "head_shared" in d:
            g.head_shared = _check_bool("gate.head_shared", d["head_shared"])
        if "combine" in d:
            g.combine = _check_enum("gate.combine", d["combine"], GATE_COMBINES)
        if "activation" in d:
            g.activation = _check_enum("gate.activation", d["activation"], GATE_ACTIVATIONS)
        if "input" in d:
            g.input = _check_enum("gate.input", d["input"], GATE_INPUTS)
        if "input_dims" in d:
            g.input_dims = _check_int("gate.input_dims", d["input_dims"], 0)
        if "init" in d:
            g.init = _check_enum("gate.init", d["init"], GATE_INITS)
        return g

    def to_json(self):
        return dataclasses.asdict(self)


@dataclasses.dataclass
class RopeScaling:
    type: str = "none"
    factor: float = 1.0
    original_max_seq_len: Optional[int] = None   # None -> max_seq_len

    @classmethod
    def from_json(cls, d):
        if not isinstance(d, dict):
            raise ConfigError(f"rope_scaling must be an object, got {d!r}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ConfigError(f"unknown rope_scaling keys: {sorted(unknown)}")
        r = cls()
        if "type" in d:
            r.type = _check_enum("rope_scaling.type", d["type"], ROPE_SCALINGS)
        if "factor" in d:
            r.factor = _check_num("rope_scaling.factor", d["factor"])
        if d.get("original_max_seq_len") is not None:   # to_json writes None for "max_seq_len"
            r.original_max_seq_len = _check_int("rope_scaling.original_max_seq_len",
                                                d["original_max_seq_len"], 1)
        return r


_REQUIRED = ("vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads", "head_dim",
             "ffn_hidden", "max_seq_len")


@dataclasses.dataclass
class ModelConfig:
    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    ffn_hidden: int
    max_seq_len: int
    rope_base: float = 10000.0
    rope_dims: Optional[int] = None     # None -> head_dim
    rope_scaling: RopeScaling = dataclasses.field(default_factory=RopeScaling)
    qk_norm: bool = True
    tie_embeddings: bool = False
    norm_eps: float = 1e-6
    init_std: float = 0.02
    gate: GateConfig = dataclasses.field(default_factory=GateConfig)
    sdpa_transform: str = "none"
    sandwich_norm: bool = False
    residual_clip: float = 0.0          # 0 = off
    attn_qkv_bias: bool = False         # biases on q, k, v (and a hidden-input gate)
    attn_o_bias: bool = False           # bias on o_proj
    attention_sinks: bool = False       # a learned sink logit per head (gpt-oss's self_attn.sinks)
    attention_normalizer: str = "softmax"   # or "softpick" (arXiv 2504.20966)
    switch_heads: Optional[swr.SwitchHeadsConfig] = None   # switch_heads_reference.py
    moe: Optional["MoeConfig"] = None   # mixture-of-experts FFN (moe_reference.py)
    # Hybrid models (hybrid_reference.py): which layers are Gated DeltaNet layers, their shape,
    # and zero-centred block norms x_hat * (1 + w).
    layer_types: Optional[list] = None
    full_attention_interval: Optional[int] = None
    linear_attention: Optional[hyb.LinearAttentionConfig] = None
    norm_zero_centered: bool = False
    sliding_window: int = 0             # the window of sliding_attention layers

    @classmethod
    def from_json(cls, d):
        if not isinstance(d, dict):
            raise ConfigError("config must be a JSON object")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ConfigError(f"unknown config keys: {sorted(unknown)}")
        missing = [k for k in _REQUIRED if k not in d]
        if missing:
            raise ConfigError(f"missing required config keys: {missing}")
        kw = {k: _check_int(k, d[k], 1) for k in _REQUIRED}
        cfg = cls(**kw)
        if "rope_base" in d:
            cfg.rope_base = _check_num("rope_base", d["rope_base"])
        if "rope_dims" in d:
            cfg.rope_dims = _check_int("rope_dims", d["rope_dims"], 0)
        if "rope_scaling" in d:
            cfg.rope_scaling = RopeScaling.from_json(d["rope_scaling"])
        if "qk_norm" in d:
            cfg.qk_norm = _check_bool("qk_norm", d["qk_norm"])
        if "tie_embeddings" in d:
            cfg.tie_embeddings = _check_bool("tie_embeddings", d["tie_embeddings"])
        if "norm_eps" in d:
            cfg.norm_eps = _check_num("norm_eps", d["norm_eps"])
        if "init_std" in d:
            cfg.init_std = _check_num("init_std", d["init_std"])
        if "gate" in d:
            cfg.gate = GateConfig.from_json(d["gate"])
        if "sdpa_transform" in d:
            cfg.sdpa_transform = _check_enum("sdpa_transform", d["sdpa_transform"], SDPA_TRANSFORMS)
        if "sandwich_norm" in d:
            cfg.sandwich_norm = _check_bool("sandwich_norm", d["sandwich_norm"])
        if "residual_clip" in d:
            cfg.residual_clip = _check_num("residual_clip", d["residual_clip"])
        if "attn_qkv_bias" in d:
            cfg.attn_qkv_bias = _check_bool("attn_qkv_bias", d["attn_qkv_bias"])
        if "attn_o_bias" in d:
            cfg.attn_o_bias = _check_bool("attn_o_bias", d["attn_o_bias"])
        if "attention_sinks" in d:
            cfg.attention_sinks = _check_bool("attention_sinks", d["attention_sinks"])
        if "attention_normalizer" in d:
            cfg.attention_normalizer = _check_enum("attention_normalizer", d["attention_normalizer"],
                                                   ("softmax", "softpick"))
        if "switch_heads" in d:
            cfg.switch_heads = swr.SwitchHeadsConfig.from_json(d["switch_heads"], ConfigError)
        if "moe" in d:
            cfg.moe = MoeConfig.from_json(d["moe"])
        hyb.parse_config_keys(cfg, d, ConfigError)
        cfg.validate()
        return cfg

    def to_json(self):
        d = dataclasses.asdict(self)
        d["rope_dims"] = self.rotary_dims
        d["gate"] = self.gate.to_json()
        if self.moe is None:
            del d["moe"]
        for key in ("attn_qkv_bias", "attn_o_bias", "attention_sinks", "switch_heads"):
            if not d[key]:
                del d[key]            # written only when on, as the engine does
        if self.rope_scaling.type == "none":
            del d["rope_scaling"]     # written only when it scales, as the engine does
        if self.attention_normalizer == "softmax":
            del d["attention_normalizer"]
        else:
            d["rope_scaling"] = {"type": self.rope_scaling.type, "factor": self.rope_scaling.factor,
                                 "original_max_seq_len": self.original_len}
        return hyb.drop_unset_keys(d)

    @property
    def original_len(self):
        o = self.rope_scaling.original_max_seq_len
        return self.max_seq_len if o is None else o

    @property
    def rotary_dims(self):
        return self.head_dim if self.rope_dims is None else self.rope_dims

    def validate(self):
        if self.n_heads % self.n_kv_heads != 0:
            raise ConfigError(f"n_heads {self.n_heads} not a multiple of n_kv_heads {self.n_kv_heads}")
        r = self.rotary_dims
        if r % 2 != 0 or r > self.head_dim:
            raise ConfigError(f"rope_dims {r} must be even and <= head_dim {self.head_dim}")
        if self.rope_base <= 0:
            raise ConfigError("rope_base must be > 0")
        rs = self.rope_scaling
        if rs.type == "none" and rs.factor != 1.0:
            raise ConfigError("rope_scaling.factor must be 1 with type none")
        if rs.type != "none" and not rs.factor >= 1.0:
            raise ConfigError("rope_scaling.factor must be >= 1")
        if rs.type == "ntk" and r <= 2:
            raise ConfigError("rope_scaling ntk needs rope_dims > 2")
        if self.norm_eps <= 0:
            raise ConfigError("norm_eps must be > 0")
        if self.residual_clip < 0:
            raise ConfigError("residual_clip must be >= 0")
        g = self.gate
        if g.input_dims > self.d_model:
            raise ConfigError(f"gate.input_dims {g.input_dims} > d_model {self.d_model}")
        if g.position == "dense" and (g.granularity != "elementwise" or g.head_shared):
            raise ConfigError("dense gate is elementwise over d_model only")
        if g.head_shared and g.granularity != "elementwise":
            raise ConfigError("head_shared gates have the elementwise shape")
        if self.gate_has_bias() and self.gate_in() != self.d_model:
            raise ConfigError("attn_qkv_bias needs a gate that reads all of d_model")
        if self.switch_heads is not None and self.attn_qkv_bias:
            raise ConfigError("switch_heads: the experts have no biases (attn_qkv_bias must be false)")
        hyb.validate(self, ConfigError)

    def gate_has_bias(self):
        return self.attn_qkv_bias and self.gate.position != "none" and self.gate.input == "hidden"

    # ---- derived gate shapes -------------------------------------------------------------
    def gate_heads(self):
        """Number of heads of the tensor the gate applies to (None for dense)."""
        p = self.gate.position
        if p in ("sdpa", "query"):
            return self.n_heads
        if p in ("value", "key"):
            return self.n_kv_heads
        return None

    def gate_out(self):
        g = self.gate
        if g.position == "none":
            return 0
        if g.position == "dense":
            return self.d_model
        heads = self.gate_heads()
        if g.granularity == "headwise":
            return heads
        return heads * self.head_dim

    def gate_in(self):
        return self.gate.input_dims if self.gate.input_dims > 0 else self.d_model


def attention_shapes(cfg, p):
    """name -> shape of one softmax layer's self_attn tensors (p = 'model.layers.{i}.')."""
    d, dk = cfg.d_model, cfg.head_dim
    nq, nk = cfg.n_heads, cfg.n_kv_heads
    shapes = {}
    shapes[p + "self_attn.q_proj.weight"] = (nq * dk, d)
    sw = cfg.switch_heads
    if sw is None or not sw.switches_k:
        shapes[p + "self_attn.k_proj.weight"] = (nk * dk, d)
    if sw is None:
        shapes[p + "self_attn.v_proj.weight"] = (nk * dk, d)
    else:
        shapes.update(swr.parameter_shapes(cfg, p))
    shapes[p + "self_attn.o_proj.weight"] = (d, nq * dk)
    if cfg.attn_qkv_bias:
        shapes[p + "self_attn.q_proj.bias"] = (nq * dk,)
        shapes[p + "self_attn.k_proj.bias"] = (nk * dk,)
        shapes[p + "self_attn.v_proj.bias"] = (nk * dk,)
    if cfg.attn_o_bias:
        shapes[p + "self_attn.o_proj.bias"] = (d,)
    if cfg.qk_norm:
        shapes[p + "self_attn.q_norm.weight"] = (dk,)
        shapes[p + "self_attn.k_norm.weight"] = (dk,)
    if cfg.gate.position != "none":
        if cfg.gate.input == "hidden":
            shapes[p + "self_attn.gate.weight"] = (cfg.gate_out(), cfg.gate_in())
            if cfg.gate_has_bias():
                shapes[p + "self_attn.gate.bias"] = (cfg.gate_out(),)
        else:
            shapes[p + "self_attn.gate.weight"] = (cfg.gate_out(),)
    if cfg.sdpa_transform == "rmsnorm":
        shapes[p + "self_attn.sdpa_norm.weight"] = (dk,)
    if cfg.attention_sinks:
        shapes[p + "self_attn.sinks"] = (nq,)
    return shapes


def parameter_shapes(cfg):
    """Ordered dict checkpoint name -> shape, computed from the config alone (no allocation)."""
    d = cfg.d_model
    shapes = {"model.embed_tokens.weight": (cfg.vocab_size, d)}
    for i in range(cfg.n_layers):
        p = f"model.layers.{i}."
        shapes[p + "input_layernorm.weight"] = (d,)
        if hyb.is_linear_layer(cfg, i):
            shapes.update(hyb.parameter_shapes(cfg, p))
        else:
            shapes.update(attention_shapes(cfg, p))
        shapes[p + "post_attention_layernorm.weight"] = (d,)
        if cfg.sandwich_norm:
            shapes[p + "post_attn_branch_norm.weight"] = (d,)
            shapes[p + "post_ffn_branch_norm.weight"] = (d,)
        if cfg.moe is not None and cfg.moe.is_moe_layer(i):
            shapes.update({p + k: v for k, v in moe_shapes(cfg.moe, d).items()})
            continue
        shapes[p + "mlp.gate_proj.weight"] = (cfg.ffn_hidden, d)
        shapes[p + "mlp.up_proj.weight"] = (cfg.ffn_hidden, d)
        shapes[p + "mlp.down_proj.weight"] = (d, cfg.ffn_hidden)
    shapes["model.norm.weight"] = (d,)
    if not cfg.tie_embeddings:
        shapes["lm_head.weight"] = (cfg.vocab_size, d)
    return shapes


def gate_parameter_count(cfg):
    """Parameters added by the gate (all layers), from shapes only."""
    return sum(math.prod(s) for n, s in parameter_shapes(cfg).items() if ".self_attn.gate." in n)


# ---- building blocks --------------------------------------------------------------------

class Weight(nn.Module):
    """Holds one parameter called `weight` (so names come out as `<module>.weight`), and
    with bias=N a second one called `bias` of shape [N]."""

    def __init__(self, *shape, device=None, bias=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(*shape, device=device))
        if bias is not None:
            self.bias = nn.Parameter(torch.empty(bias, device=device))

    def linear(self, x):
        """x @ W^T (+ b)."""
        y = x @ self.weight.t()
        return y + self.bias if hasattr(self, "bias") else y


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * w


def block_norm(cfg, x, w):
    """A block RMSNorm: weight w, or 1 + w with norm_zero_centered (hybrid_reference.norm_weight)."""
    return rms_norm(x, hyb.norm_weight(cfg, w), cfg.norm_eps)


def rope_scaled_inv_freq(rot_dims, base, scaling="none", factor=1.0, original_len=None, device=None):
    """(inv_freq [rot_dims/2] float64, magnitude) of RoPE with a context-extension scaling.

    linear: inv_freq / s. ntk: base * s^(D/(D-2)). yarn: Hugging Face transformers'
    _compute_yarn_parameters (beta_fast 32, beta_slow 1, floor/ceil, mscale 0.1 ln s + 1).
    """
    D = rot_dims
    i = torch.arange(D // 2, dtype=torch.float64, device=device)
    if scaling == "ntk":
        base = base * factor ** (D / (D - 2))
    inv_freq = base ** (-(2.0 * i) / D)
    if scaling == "linear":
        return inv_freq / factor, 1.0
    if scaling == "yarn":
        def correction_dim(rotations):
            return (D * math.log(original_len / (rotations * 2 * math.pi))) / (2 * math.log(base))
        low = max(math.floor(correction_dim(32.0)), 0)
        high = min(math.ceil(correction_dim(1.0)), D - 1)
        if low == high:
            high += 0.001
        ramp = torch.clamp((i - low) / (high - low), 0, 1)
        extrapolation_factor = 1 - ramp
        inv_freq = (inv_freq / factor) * (1 - extrapolation_factor) + inv_freq * extrapolation_factor
        mscale = 1.0 if factor <= 1 else 0.1 * math.log(factor) + 1.0
        return inv_freq, mscale
    return inv_freq, 1.0


def rope_cos_sin(T, rot_dims, base, dtype, device=None, scaling="none", factor=1.0, original_len=None):
    """cos/sin [T, rot_dims/2], computed in float64 then cast (times YaRN's magnitude)."""
    inv_freq, mag = rope_scaled_inv_freq(rot_dims, base, scaling, factor, original_len, device)
    pos = torch.arange(T, dtype=torch.float64, device=device)
    ang = pos[:, None] * inv_freq[None, :]
    return (torch.cos(ang) * mag).to(dtype), (torch.sin(ang) * mag).to(dtype)


def apply_rope(x, cos, sin):
    """x [B, T, H, dk]; rotate-half over the first 2*cos.shape[-1] dims."""
    half = cos.shape[-1]
    if half == 0:
        return x
    R = 2 * half
    c = cos[None, :, None, :]
    s = sin[None, :, None, :]
    x1, x2, rest = x[..., :half], x[..., half:R], x[..., R:]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s, rest], dim=-1)


def gate_activation(s, name):
    if name == "sigmoid":
        return torch.sigmoid(s)
    if name == "silu":
        return F.silu(s)
    if name == "ns_sigmoid":
        return 0.5 + 0.5 * torch.sigmoid(s)
    if name == "identity":
        return s
    raise ValueError(name)


class Attention(nn.Module):
    def __init__(self, cfg, device=None, window=0):
        super().__init__()
        self.cfg = cfg
        self.window = window      # sliding window W: query t sees keys t - W < j <= t; 0: all
        d, dk, nq, nk = cfg.d_model, cfg.head_dim, cfg.n_heads, cfg.n_kv_heads
        qkv_bias = cfg.attn_qkv_bias
        self.q_proj = Weight(nq * dk, d, device=device, bias=nq * dk if qkv_bias else None)
        sw = cfg.switch_heads
        if sw is None or not sw.switches_k:
            self.k_proj = Weight(nk * dk, d, device=device, bias=nk * dk if qkv_bias else None)
        if sw is None:
            self.v_proj = Weight(nk * dk, d, device=device, bias=nk * dk if qkv_bias else None)
        else:
            swr.add_modules(self, cfg, Weight, device)
        self.o_proj = Weight(d, nq * dk, device=device, bias=d if cfg.attn_o_bias else None)
        if cfg.qk_norm:
            self.q_norm = Weight(dk, device=device)
            self.k_norm = Weight(dk, device=device)
        if cfg.gate.position != "none":
            if cfg.gate.input == "hidden":
                self.gate = Weight(cfg.gate_out(), cfg.gate_in(), device=device,
                                   bias=cfg.gate_out() if cfg.gate_has_bias() else None)
            else:
                self.gate = Weight(cfg.gate_out(), device=device)
        if cfg.sdpa_transform == "rmsnorm":
            self.sdpa_norm = Weight(dk, device=device)
        if cfg.attention_sinks:   # a parameter named self_attn.sinks, as gpt-oss names it
            self.sinks = nn.Parameter(torch.zeros(nq, device=device))

    def gate_score(self, h):
        """Activated gate score, shaped to broadcast against the gated tensor.

        h: [B, T, d] (the attention block's normalised input X).
        Returns [B, T, heads, dk] / [B, T, heads, 1] / [B, T, 1, dk] (head-shared) for
        sdpa/value/key/query, and [B, T, d] for dense.
        """
        cfg, g = self.cfg, self.cfg.gate
        B, T, _ = h.shape
        if g.input == "hidden":
            s = self.gate.linear(h[..., :cfg.gate_in()])
        else:
            s = self.gate.weight.expand(B, T, cfg.gate_out())
        a = gate_activation(s, g.activation)
        if g.position == "dense":
            return a
        heads = cfg.gate_heads()
        if g.granularity == "headwise":
            return a.reshape(B, T, heads, 1)
        a = a.reshape(B, T, heads, cfg.head_dim)
        if g.head_shared:
            a = a.mean(dim=2, keepdim=True)
        return a

    def apply_gate(self, y, a):
        if self.cfg.gate.combine == "multiply":
            return y * a
        return y + a

    def forward(self, h, cos, sin, trace=None, prefix=""):
        cfg, g = self.cfg, self.cfg.gate
        B, T, _ = h.shape
        dk, nq, nk = cfg.head_dim, cfg.n_heads, cfg.n_kv_heads
        a = self.gate_score(h) if g.position != "none" else None
        if trace is not None and a is not None:
            trace[prefix + "gate_score"] = a.detach()

        q = self.q_proj.linear(h).reshape(B, T, nq, dk)
        if cfg.switch_heads is None:
            k = self.k_proj.linear(h).reshape(B, T, nk, dk)
            v = self.v_proj.linear(h).reshape(B, T, nk, dk)
        else:
            k, v = swr.project(self, cfg, h, trace, prefix)
            if k is None:
                k = self.k_proj.linear(h).reshape(B, T, nk, dk)
        if g.position == "query":
            q = self.apply_gate(q, a)
        elif g.position == "key":
            k = self.apply_gate(k, a)
        elif g.position == "value":
            v = self.apply_gate(v, a)
        if cfg.qk_norm:
            q = block_norm(cfg, q, self.q_norm.weight)
            k = block_norm(cfg, k, self.k_norm.weight)
        q = apply_rope(q, cos, sin)
        k = apply_rope(k, cos, sin)

        group = nq // nk
        k = k.repeat_interleave(group, dim=2)   # query head h uses kv head h // group
        v = v.repeat_interleave(group, dim=2)
        qh, kh, vh = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # [B, H, T, dk]
        scores = (qh @ kh.transpose(-1, -2)) / math.sqrt(dk)
        causal = torch.ones(T, T, dtype=torch.bool, device=h.device).tril()
        if self.window > 0:
            causal = causal & ~torch.ones(T, T, dtype=torch.bool, device=h.device).tril(-self.window)
        scores = scores.masked_fill(~causal, float("-inf"))
        if cfg.attention_normalizer == "softpick":
            # relu(e^a - 1) / sum |e^a - 1| over the visible keys, as (e^(a-m) - e^-m) with m = max(0, max a).
            m = scores.amax(dim=-1, keepdim=True).clamp(min=0.0)
            e = (torch.exp(scores - m) - torch.exp(-m)).masked_fill(~causal, 0.0)
            probs = torch.relu(e) / e.abs().sum(dim=-1, keepdim=True)
        elif cfg.attention_sinks:
            # gpt-oss's sink: one more column in each row's softmax, dropped after it (no value).
            sink = self.sinks.reshape(1, nq, 1, 1).expand(B, nq, T, 1).to(scores.dtype)
            probs = torch.softmax(torch.cat([scores, sink], dim=-1), dim=-1)[..., :T]
        else:
            probs = torch.softmax(scores, dim=-1)
        if trace is not None:
            trace[prefix + "attn_probs"] = probs.detach()
        y = (probs @ vh).transpose(1, 2)             # [B, T, nq, dk]

        if cfg.sdpa_transform == "rmsnorm":
            y = block_norm(cfg, y, self.sdpa_norm.weight)
        elif cfg.sdpa_transform == "silu":
            y = F.silu(y)
        if g.position == "sdpa":
            if trace is not None:
                trace[prefix + "sdpa_out"] = y.detach()
            y = self.apply_gate(y, a)
        o = self.o_proj.linear(y.reshape(B, T, nq * dk))
        if g.position == "dense":
            o = self.apply_gate(o, a)
        return o


class MLP(nn.Module):
    def __init__(self, cfg, device=None):
        super().__init__()
        self.gate_proj = Weight(cfg.ffn_hidden, cfg.d_model, device=device)
        self.up_proj = Weight(cfg.ffn_hidden, cfg.d_model, device=device)
        self.down_proj = Weight(cfg.d_model, cfg.ffn_hidden, device=device)

    def forward(self, h):
        return (F.silu(h @ self.gate_proj.weight.t()) * (h @ self.up_proj.weight.t())) \
            @ self.down_proj.weight.t()


class DecoderLayer(nn.Module):
    def __init__(self, cfg, device=None, layer_index=0):
        super().__init__()
        self.cfg = cfg
        d = cfg.d_model
        self.input_layernorm = Weight(d, device=device)
        if hyb.is_linear_layer(cfg, layer_index):
            self.linear_attn = hyb.GatedDeltaNet(cfg, Weight, device=device)
        else:
            self.self_attn = Attention(cfg, device=device, window=hyb.layer_window(cfg, layer_index))
        self.post_attention_layernorm = Weight(d, device=device)
        if cfg.sandwich_norm:
            self.post_attn_branch_norm = Weight(d, device=device)
            self.post_ffn_branch_norm = Weight(d, device=device)
        if cfg.moe is not None and cfg.moe.is_moe_layer(layer_index):
            self.mlp = MoeMLP(cfg.moe, d, device=device)
        else:
            self.mlp = MLP(cfg, device=device)

    def _branch_out(self, o, norm, trace, key):
        cfg = self.cfg
        if cfg.sandwich_norm:
            o = block_norm(cfg, o, norm.weight)
        if cfg.residual_clip > 0:
            if trace is not None:
                trace[key] = o.detach()
            o = torch.clamp(o, -cfg.residual_clip, cfg.residual_clip)
        return o

    def forward(self, x, cos, sin, trace=None, prefix=""):
        cfg = self.cfg
        h = block_norm(cfg, x, self.input_layernorm.weight)
        if hasattr(self, "linear_attn"):
            o = self.linear_attn(h, trace, prefix)
        else:
            o = self.self_attn(h, cos, sin, trace, prefix)
        o = self._branch_out(o, getattr(self, "post_attn_branch_norm", None), trace,
                             prefix + "attn_branch_preclip")
        x = x + o
        h2 = block_norm(cfg, x, self.post_attention_layernorm.weight)
        f = self.mlp(h2)
        f = self._branch_out(f, getattr(self, "post_ffn_branch_norm", None), trace,
                             prefix + "ffn_branch_preclip")
        x = x + f
        if trace is not None:
            trace[prefix + "residual"] = x.detach()
        return x


class Backbone(nn.Module):
    def __init__(self, cfg, device=None):
        super().__init__()
        self.embed_tokens = Weight(cfg.vocab_size, cfg.d_model, device=device)
        self.layers = nn.ModuleList([DecoderLayer(cfg, device=device, layer_index=i)
                                     for i in range(cfg.n_layers)])
        self.norm = Weight(cfg.d_model, device=device)


class GatedLM(nn.Module):
    def __init__(self, cfg, device=None):
        super().__init__()
        if isinstance(cfg, dict):
            cfg = ModelConfig.from_json(cfg)
        cfg.validate()
        self.cfg = copy.deepcopy(cfg)
        self.model = Backbone(self.cfg, device=device)
        if not self.cfg.tie_embeddings:
            self.lm_head = Weight(self.cfg.vocab_size, self.cfg.d_model, device=device)
        if device is None or torch.device(device).type != "meta":
            self.init_weights()

    # ---- weights --------------------------------------------------------------------------
    def init_weights(self, generator=None):
        """Default init: matrices N(0, init_std), norms 1 (0 when zero-centred), biases 0,
        gates per gate.init, linear layers' vectors per hybrid_reference.init_parameter."""
        cfg = self.cfg
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith(".bias") or name.endswith(".self_attn.sinks"):
                    p.zero_()
                elif ".self_attn.gate." in name:
                    if cfg.gate.init == "zero":
                        p.zero_()
                    else:
                        p.normal_(0.0, cfg.init_std, generator=generator)
                elif p.ndim >= 2:
                    p.normal_(0.0, cfg.init_std, generator=generator)
                elif hyb.init_parameter(name, p, generator):
                    pass
                else:
                    p.fill_(0.0 if cfg.norm_zero_centered and hyb.is_block_norm(name) else 1.0)

    def state_dict_flat(self):
        """name -> tensor (detached), in checkpoint order."""
        return {n: p.detach() for n, p in self.named_parameters()}

    def load_flat(self, tensors, strict=True):
        params = dict(self.named_parameters())
        if strict:
            missing = sorted(set(params) - set(tensors))
            extra = sorted(set(tensors) - set(params))
            if missing or extra:
                raise KeyError(f"checkpoint mismatch: missing {missing}, unexpected {extra}")
        with torch.no_grad():
            for n, t in tensors.items():
                if n not in params:
                    continue
                p = params[n]
                if tuple(t.shape) != tuple(p.shape):
                    raise ValueError(f"{n}: checkpoint shape {tuple(t.shape)} != {tuple(p.shape)}")
                p.copy_(t.to(p.dtype))

    # ---- compute --------------------------------------------------------------------------
    def forward(self, tokens, trace=None):
        """tokens [B, T] int64 -> logits [B, T, V] in the parameters' dtype.

        If `trace` is a dict, intermediate tensors are stored in it (detached).
        """
        cfg = self.cfg
        B, T = tokens.shape
        if T > cfg.max_seq_len:
            raise ValueError(f"sequence length {T} > max_seq_len {cfg.max_seq_len}")
        emb = self.model.embed_tokens.weight
        x = emb[tokens]
        rs = cfg.rope_scaling
        cos, sin = rope_cos_sin(T, cfg.rotary_dims, cfg.rope_base, emb.dtype, emb.device,
                                rs.type, rs.factor, cfg.original_len)
        for i, layer in enumerate(self.model.layers):
            x = layer(x, cos, sin, trace, f"layers.{i}.")
        x = block_norm(cfg, x, self.model.norm.weight)
        w_out = emb if cfg.tie_embeddings else self.lm_head.weight
        return x @ w_out.t()

    def loss_from_logits(self, logits, tokens):
        """Mean cross-entropy, plus with MoE the weighted auxiliary losses of the forward
        that made the logits (moe_reference.aux_loss)."""
        V = logits.shape[-1]
        return F.cross_entropy(logits[:, :-1].reshape(-1, V), tokens[:, 1:].reshape(-1),
                               reduction="mean") + aux_loss(self)

    def loss(self, tokens):
        return self.loss_from_logits(self(tokens), tokens)


def config_from_file(path):
    import json
    with open(path) as f:
        return ModelConfig.from_json(json.load(f))


def load_checkpoint(directory, dtype=torch.float32):
    """Load `<dir>/config.json` + `<dir>/model.safetensors` into a GatedLM of `dtype`."""
    import os
    from safetensors_io import load
    cfg = config_from_file(os.path.join(directory, "config.json"))
    model = GatedLM(cfg).to(dtype)
    model.load_flat(load(os.path.join(directory, "model.safetensors")))
    return model
