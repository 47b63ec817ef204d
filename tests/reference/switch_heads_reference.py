"""Switch heads in the PyTorch reference (SwitchHead, Csordás et al.; the paper's Appendix A.1).

Per KV head h and token t (x_t = the attention block's normalised input):
    r[t, h, e] = x_t . R[h*E + e]                    router, R = self_attn.{v,kv}_router.weight
    S(t, h)    = the top_k experts by r (a tie goes to the lower expert index)
    v[t, h]    = sum_{e in S} sigmoid(r[t, h, e]) * V_e[h*dk:(h+1)*dk] x_t
and k likewise from the key experts with the same S and scores when experts_on is "kv".
No renormalisation. Written plainly: every expert is computed densely, then the chosen
ones are gathered (the engine computes only the chosen ones; that is what is checked).

reference_model.py calls in here (config, shapes, modules, forward); test_against_engine.py
takes ENGINE_CASES, adjust_case_weights and the selection-margin statistics.
"""

import dataclasses
import math

import torch
import torch.nn as nn

EXPERTS_ON = ("v", "kv")


class SwitchHeadsError(ValueError):
    pass


@dataclasses.dataclass
class SwitchHeadsConfig:
    n_experts: int
    top_k: int
    experts_on: str = "v"

    @classmethod
    def from_json(cls, d, config_error=SwitchHeadsError):
        if not isinstance(d, dict):
            raise config_error(f"switch_heads must be an object, got {d!r}")
        unknown = set(d) - {"n_experts", "top_k", "experts_on"}
        if unknown:
            raise config_error(f"unknown switch_heads keys: {sorted(unknown)}")
        for key in ("n_experts", "top_k"):
            if key not in d:
                raise config_error(f"switch_heads: missing required key {key}")
            v = d[key]
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise config_error(f"switch_heads.{key} must be a positive integer, got {v!r}")
        s = cls(d["n_experts"], d["top_k"], d.get("experts_on", "v"))
        if s.experts_on not in EXPERTS_ON:
            raise config_error(f"switch_heads.experts_on must be one of {'|'.join(EXPERTS_ON)}, got {s.experts_on!r}")
        if s.top_k > s.n_experts:
            raise config_error(f"switch_heads.top_k {s.top_k} > n_experts {s.n_experts}")
        return s

    def to_json(self):
        return dataclasses.asdict(self)

    @property
    def switches_k(self):
        return self.experts_on == "kv"

    @property
    def router_name(self):
        return "kv_router" if self.switches_k else "v_router"

    def expert_kinds(self):
        return ("k", "v") if self.switches_k else ("v",)


def parameter_shapes(cfg, prefix):
    """name -> shape of one layer's switch-head tensors (prefix 'model.layers.{i}.')."""
    sw, d, kvd = cfg.switch_heads, cfg.d_model, cfg.n_kv_heads * cfg.head_dim
    shapes = {prefix + f"self_attn.{sw.router_name}.weight": (cfg.n_kv_heads * sw.n_experts, d)}
    for kind in sw.expert_kinds():
        for e in range(sw.n_experts):
            shapes[prefix + f"self_attn.{kind}_experts.{e}.weight"] = (kvd, d)
    return shapes


def add_modules(attn, cfg, weight_cls, device=None):
    """The router and experts as submodules of the attention module (checkpoint names)."""
    sw, d, kvd = cfg.switch_heads, cfg.d_model, cfg.n_kv_heads * cfg.head_dim
    setattr(attn, sw.router_name, weight_cls(cfg.n_kv_heads * sw.n_experts, d, device=device))
    for kind in sw.expert_kinds():
        setattr(attn, f"{kind}_experts",
                nn.ModuleList([weight_cls(kvd, d, device=device) for _ in range(sw.n_experts)]))


def top_k_lower_index_first(pre, k):
    """Indices [..., k] of the k largest values along the last axis, best first; equal
    values in ascending index order (a stable descending sort)."""
    return torch.sort(pre, dim=-1, descending=True, stable=True).indices[..., :k]


def project(attn, cfg, h, trace=None, prefix=""):
    """(k or None, v), each [B, T, n_kv_heads, head_dim], from h [B, T, d]."""
    sw = cfg.switch_heads
    B, T, d = h.shape
    H, E, K, dk = cfg.n_kv_heads, sw.n_experts, sw.top_k, cfg.head_dim
    pre = (h @ getattr(attn, sw.router_name).weight.t()).reshape(B, T, H, E)
    if trace is not None:
        trace[prefix + "switch_router_pre"] = pre.detach()
    chosen = top_k_lower_index_first(pre.detach(), K)            # [B, T, H, K]
    score = torch.sigmoid(pre.gather(-1, chosen))                # [B, T, H, K]

    def mix(experts):
        W = torch.stack([e.weight for e in experts]).reshape(E, H, dk, d)
        every = torch.einsum("btd,ehrd->bther", h, W)             # [B, T, H, E, dk]
        picked = every.gather(3, chosen[..., None].expand(B, T, H, K, dk))
        return (score[..., None] * picked).sum(dim=3)            # [B, T, H, dk]

    k = mix(attn.k_experts) if sw.switches_k else None
    return k, mix(attn.v_experts)


def naive_kv(cfg, P, prefix, h):
    """Loop-based float64 numpy (k or None, v) [T, H, dk] for one sequence h [T, d]; P maps
    names to numpy arrays (the self-test's independent forward)."""
    import numpy as np
    sw = cfg.switch_heads
    T = h.shape[0]
    H, E, dk = cfg.n_kv_heads, sw.n_experts, cfg.head_dim
    R = P[prefix + f"self_attn.{sw.router_name}.weight"]
    outs = {kind: np.zeros((T, H, dk)) for kind in sw.expert_kinds()}
    for t in range(T):
        for hh in range(H):
            pre = [float(R[hh * E + e] @ h[t]) for e in range(E)]
            order = sorted(range(E), key=lambda e: (-pre[e], e))[:sw.top_k]
            for e in order:
                s = 1.0 / (1.0 + math.exp(-pre[e]))
                for kind in sw.expert_kinds():
                    W = P[prefix + f"self_attn.{kind}_experts.{e}.weight"]
                    outs[kind][t, hh] += s * (W[hh * dk:(hh + 1) * dk] @ h[t])
    return outs.get("k"), outs["v"]


# ---- engine cases -----------------------------------------------------------------------

def _sw(n_experts, top_k, on, **extra):
    return {"switch_heads": {"n_experts": n_experts, "top_k": top_k, "experts_on": on}, **extra}


# Added to test_against_engine.CASES (so the decode check covers them too). Names ending
# in "_ties" get a zero router (every expert scores exactly 0: the tie rule decides, and
# experts top_k.. get no tokens) in layer 0 and for KV head 0 of every other layer.
ENGINE_CASES = {
    "switch_v_1top1": _sw(1, 1, "v"),
    "switch_v_4top2": _sw(4, 2, "v"),
    "switch_v_8top2_mqa": _sw(8, 2, "v", n_kv_heads=1),
    "switch_v_4top4": _sw(4, 4, "v"),
    "switch_kv_4top1": _sw(4, 1, "kv"),
    "switch_kv_3top2_mha": _sw(3, 2, "kv", n_kv_heads=4),
    "switch_kv_2top2_sdpa_gate": _sw(2, 2, "kv", gate={"position": "sdpa", "granularity": "headwise"}),
    "switch_v_3top1_value_gate": _sw(3, 1, "v", gate={"position": "value"}),
    "switch_kv_5top2_ties": _sw(5, 2, "kv"),
    "switch_v_4top1_ties": _sw(4, 1, "v", qk_norm=False),
}

SELECTION_MARGIN = 1e-5   # no router pre-activation this close to the k-th/(k+1)-th boundary (fp32 error ~1e-6)


def adjust_case_weights(name, model):
    """The switch *_ties cases: routers zeroed (layer 0) or their first E rows (the
    others), so that the tie rule decides. Other cases (an MoE *_ties case among them)
    are left alone."""
    cfg = model.cfg
    if not name.endswith("_ties") or getattr(cfg, "switch_heads", None) is None:
        return
    E = cfg.switch_heads.n_experts
    with torch.no_grad():
        for i, layer in enumerate(model.model.layers):
            w = getattr(layer.self_attn, cfg.switch_heads.router_name).weight
            if i == 0:
                w.zero_()
            else:
                w[:E].zero_()


def selection_stats(cfg, trace, stats):
    """Smallest gap between the k-th and (k+1)-th router pre-activation over a traced
    forward, ignoring exact ties (those the tie rule settles the same way everywhere)."""
    sw = getattr(cfg, "switch_heads", None)
    if sw is None or sw.top_k == sw.n_experts:
        return
    for key, pre in trace.items():
        if key.endswith("switch_router_pre"):
            top = torch.sort(pre, dim=-1, descending=True).values
            gap = (top[..., sw.top_k - 1] - top[..., sw.top_k]).reshape(-1)
            gap = gap[gap != 0]
            if gap.numel():
                stats["switch_min_gap"] = min(stats.get("switch_min_gap", math.inf), float(gap.min()))


def selection_well_separated(stats):
    return stats.get("switch_min_gap", math.inf) >= SELECTION_MARGIN
