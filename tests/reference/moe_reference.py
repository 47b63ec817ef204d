"""The mixture-of-experts FFN of gatedlm in plain PyTorch (src/model/moe.h), written the
usual way: a dense softmax router, a loop over experts, index_add_ back. Used by the
reference model (reference_model.py) and by bench/compare_moe.py as the PyTorch peer.

    z = h R^T, p = softmax(z), top-k by z (equal logits: the lower expert index first),
    w = p_sel (/ sum p_sel with norm_topk_prob),
    y = sum_j w_j E_j(h) + sigmoid(h g^T) S(h)        (S: shared expert, when n_shared > 0)
    LB = E * sum_i f_i P_i, f_i = share of assignments to i (constant), P_i = mean p_i
    Z  = mean_t logsumexp(z_t)^2
"""
import dataclasses

import torch
import torch.nn.functional as F
from torch import nn

_KEYS = ("n_experts", "top_k", "expert_hidden", "n_shared", "shared_hidden", "every",
         "norm_topk_prob", "lb_coef", "lb_scope", "z_coef")


@dataclasses.dataclass
class MoeConfig:
    n_experts: int
    top_k: int
    expert_hidden: int
    n_shared: int = 0
    shared_hidden: int = 0          # 0 -> expert_hidden
    every: int = 1
    norm_topk_prob: bool = True
    lb_coef: float = 0.001
    lb_scope: str = "global"
    z_coef: float = 0.001

    @classmethod
    def from_json(cls, d):
        unknown = set(d) - set(_KEYS)
        if unknown:
            raise ValueError(f"unknown moe keys: {sorted(unknown)}")
        m = cls(**{k: v for k, v in d.items()})
        if not m.shared_hidden:
            m.shared_hidden = m.expert_hidden
        if not 1 <= m.top_k <= m.n_experts or m.lb_scope not in ("global", "micro"):
            raise ValueError(f"bad moe config {d}")
        return m

    def to_json(self):
        return dataclasses.asdict(self)

    def is_moe_layer(self, i):
        return (i + 1) % self.every == 0

    def n_moe_layers(self, n_layers):
        return n_layers // self.every


def moe_shapes(m, d):
    """Checkpoint suffix -> shape of one MoE layer, in layout order."""
    f, fs = m.expert_hidden, m.n_shared * m.shared_hidden
    shapes = {"mlp.gate.weight": (m.n_experts, d)}
    for e in range(m.n_experts):
        shapes[f"mlp.experts.{e}.gate_proj.weight"] = (f, d)
        shapes[f"mlp.experts.{e}.up_proj.weight"] = (f, d)
        shapes[f"mlp.experts.{e}.down_proj.weight"] = (d, f)
    if m.n_shared:
        shapes["mlp.shared_expert.gate_proj.weight"] = (fs, d)
        shapes["mlp.shared_expert.up_proj.weight"] = (fs, d)
        shapes["mlp.shared_expert.down_proj.weight"] = (d, fs)
        shapes["mlp.shared_expert_gate.weight"] = (1, d)
    return shapes


class _W(nn.Module):
    def __init__(self, *shape, device=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(*shape, device=device))


class SwiGLU(nn.Module):
    def __init__(self, d, f, device=None):
        super().__init__()
        self.gate_proj = _W(f, d, device=device)
        self.up_proj = _W(f, d, device=device)
        self.down_proj = _W(d, f, device=device)

    def forward(self, h):
        return (F.silu(h @ self.gate_proj.weight.t()) * (h @ self.up_proj.weight.t())) @ self.down_proj.weight.t()


def top_k_lower_index_first(z, k):
    """Indices [N, k] of the k largest logits per row, best first; equal logits: lower index
    first (a stable descending sort keeps the original order of equal values)."""
    return torch.sort(z, dim=-1, descending=True, stable=True).indices[:, :k]


class MoeMLP(nn.Module):
    def __init__(self, m, d, device=None):
        super().__init__()
        self.m = m
        self.gate = _W(m.n_experts, d, device=device)
        self.experts = nn.ModuleList([SwiGLU(d, m.expert_hidden, device=device) for _ in range(m.n_experts)])
        if m.n_shared:
            self.shared_expert = SwiGLU(d, m.n_shared * m.shared_hidden, device=device)
            self.shared_expert_gate = _W(1, d, device=device)
        self.last = None  # what the last forward routed: {"counts", "mean_p", "z", "margin"}

    def forward(self, h):
        m = self.m
        shape = h.shape
        x = h.reshape(-1, shape[-1])
        z = x @ self.gate.weight.t()
        p = torch.softmax(z, dim=-1)
        sel = top_k_lower_index_first(z, m.top_k)                       # [N, k]
        w = torch.gather(p, 1, sel)
        if m.norm_topk_prob:
            w = w / w.sum(dim=-1, keepdim=True)
        y = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):                     # the usual loop over experts
            tok, slot = torch.nonzero(sel == e, as_tuple=True)
            if tok.numel() == 0:
                continue
            y = y.index_add(0, tok, w[tok, slot].unsqueeze(-1) * expert(x[tok]))
        if m.n_shared:
            y = y + torch.sigmoid(x @ self.shared_expert_gate.weight.t()) * self.shared_expert(x)
        counts = torch.bincount(sel.reshape(-1), minlength=m.n_experts)
        zs = torch.sort(z.detach(), dim=-1, descending=True).values
        gaps = (zs[:, m.top_k - 1] - zs[:, m.top_k]) if m.top_k < m.n_experts else zs[:, 0] * 0 + float("inf")
        gaps = gaps[gaps != 0]  # exact ties resolve the same way in both precisions
        self.last = {"counts": counts, "mean_p": p.mean(dim=0), "z": torch.logsumexp(z, dim=-1).pow(2).mean(),
                     "margin": float(gaps.min()) if gaps.numel() else float("inf")}
        return y.reshape(shape)


def moe_layers(model):
    return [mod for mod in model.modules() if isinstance(mod, MoeMLP)]


def aux_losses(model, counts=None):
    """(LB, Z) of the last forward, averaged over the MoE layers. counts: per MoE layer the
    assignments f_i counts over (the balance scope); default the forward's own."""
    layers = moe_layers(model)
    lb = z = 0.0
    for i, mod in enumerate(layers):
        c = (mod.last["counts"] if counts is None else counts[i]).to(mod.last["mean_p"].dtype)
        f = c / c.sum()
        lb = lb + mod.m.n_experts * (f.detach() * mod.last["mean_p"]).sum()
        z = z + mod.last["z"]
    return lb / len(layers), z / len(layers)


def aux_loss(model, counts=None):
    """lb_coef * LB + z_coef * Z (0 without MoE layers)."""
    layers = moe_layers(model)
    if not layers:
        return 0.0
    lb, z = aux_losses(model, counts)
    m = layers[0].m
    return m.lb_coef * lb + m.z_coef * z


def min_routing_margin(model):
    """Smallest gap between the k-th and (k+1)-th logit in the last forward (inf: none)."""
    return min((mod.last["margin"] for mod in moe_layers(model)), default=float("inf"))
