#!/usr/bin/env python3
"""The PyTorch side of bench/compare_pytorch.py: times training steps of the same model
(Qwen3-style decoder, optional G1 elementwise sigmoid gate as a separate projection) on a
fixed random batch, eager mode, AdamW. Prints JSON {step_ms, peak_rss_bytes}.

torch 1.13 has no fused scaled_dot_product_attention; the fastest eager attention it
offers on CPU is a batched matmul with an additive causal mask and softmax, used here.
Run with /usr/bin/python3 (Debian's python3-torch)."""
import argparse
import json
import resource
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class MoeFFN(nn.Module):
    """The usual PyTorch MoE FFN (as Hugging Face's Qwen2-MoE / Qwen3-MoE blocks): softmax
    router, top-k, optional renormalisation, a Python loop over the experts with index_add_
    back, a sigmoid-gated shared expert; plus the load-balancing and z losses of the step
    (kept in self.aux for the loss)."""

    def __init__(self, c):
        super().__init__()
        m, d = c["moe"], c["d_model"]
        if m.get("every", 1) != 1:
            raise SystemExit("torch_peer: only MoE in every layer (moe.every 1) is modelled")
        self.E, self.k = m["n_experts"], m["top_k"]
        self.norm = m.get("norm_topk_prob", True)
        self.lb_coef, self.z_coef = m.get("lb_coef", 0.001), m.get("z_coef", 0.001)
        f = m["expert_hidden"]
        self.gate = nn.Linear(d, self.E, bias=False)
        self.experts = nn.ModuleList(
            nn.ModuleDict({"gate_proj": nn.Linear(d, f, bias=False), "up_proj": nn.Linear(d, f, bias=False),
                           "down_proj": nn.Linear(f, d, bias=False)}) for _ in range(self.E))
        fs = m.get("n_shared", 0) * m.get("shared_hidden", f)
        self.shared = None
        if fs:
            self.shared = nn.ModuleDict({"gate_proj": nn.Linear(d, fs, bias=False),
                                         "up_proj": nn.Linear(d, fs, bias=False),
                                         "down_proj": nn.Linear(fs, d, bias=False)})
            self.shared_gate = nn.Linear(d, 1, bias=False)
        self.aux = 0.0

    @staticmethod
    def swiglu(e, x):
        return e["down_proj"](F.silu(e["gate_proj"](x)) * e["up_proj"](x))

    def forward(self, h):
        shape = h.shape
        x = h.reshape(-1, shape[-1])
        logits = self.gate(x)
        p = torch.softmax(logits, dim=-1, dtype=torch.float)
        w, sel = torch.topk(p, self.k, dim=-1)
        if self.norm:
            w = w / w.sum(dim=-1, keepdim=True)
        w = w.to(x.dtype)
        y = torch.zeros_like(x)
        mask = F.one_hot(sel, num_classes=self.E).permute(2, 1, 0)  # [E, k, N]
        for e in range(self.E):
            slot, tok = torch.where(mask[e])
            if tok.numel() == 0:
                continue
            y.index_add_(0, tok, self.swiglu(self.experts[e], x[tok]) * w[tok, slot, None])
        if self.shared is not None:
            y = y + torch.sigmoid(self.shared_gate(x)) * self.swiglu(self.shared, x)
        f = mask.sum(dim=(1, 2)).float()
        lb = self.E * ((f / f.sum()).detach() * p.mean(dim=0)).sum()
        z = torch.logsumexp(logits.float(), dim=-1).pow(2).mean()
        self.aux = self.lb_coef * lb + self.z_coef * z
        return y.reshape(shape)


class Block(nn.Module):
    def __init__(self, c, gated):
        super().__init__()
        d, hq, hk, dk, f = c["d_model"], c["n_heads"], c["n_kv_heads"], c["head_dim"], c["ffn_hidden"]
        self.hq, self.hk, self.dk = hq, hk, dk
        self.norm1, self.norm2 = RMSNorm(d), RMSNorm(d)
        self.q = nn.Linear(d, hq * dk, bias=False)
        self.k = nn.Linear(d, hk * dk, bias=False)
        self.v = nn.Linear(d, hk * dk, bias=False)
        self.o = nn.Linear(hq * dk, d, bias=False)
        self.q_norm, self.k_norm = RMSNorm(dk), RMSNorm(dk)
        self.gate = nn.Linear(d, hq * dk, bias=False) if gated else None
        self.moe = MoeFFN(c) if "moe" in c else None
        if self.moe is None:
            self.w_gate = nn.Linear(d, f, bias=False)
            self.w_up = nn.Linear(d, f, bias=False)
            self.w_down = nn.Linear(f, d, bias=False)

    def forward(self, x, cos, sin, mask):
        b, t, _ = x.shape
        h = self.norm1(x)
        q = self.q_norm(self.q(h).view(b, t, self.hq, self.dk)).transpose(1, 2)
        k = self.k_norm(self.k(h).view(b, t, self.hk, self.dk)).transpose(1, 2)
        v = self.v(h).view(b, t, self.hk, self.dk).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if self.hq != self.hk:
            k = k.repeat_interleave(self.hq // self.hk, dim=1)
            v = v.repeat_interleave(self.hq // self.hk, dim=1)
        scores = torch.matmul(q, k.transpose(-1, -2)) * (self.dk ** -0.5) + mask
        y = torch.matmul(torch.softmax(scores, dim=-1), v).transpose(1, 2).reshape(b, t, self.hq * self.dk)
        if self.gate is not None:
            y = y * torch.sigmoid(self.gate(h))
        x = x + self.o(y)
        h2 = self.norm2(x)
        if self.moe is not None:
            return x + self.moe(h2)
        return x + self.w_down(F.silu(self.w_gate(h2)) * self.w_up(h2))


class Model(nn.Module):
    def __init__(self, c, gated):
        super().__init__()
        self.embed = nn.Embedding(c["vocab_size"], c["d_model"])
        self.blocks = nn.ModuleList(Block(c, gated) for _ in range(c["n_layers"]))
        self.norm = RMSNorm(c["d_model"])
        self.head = nn.Linear(c["d_model"], c["vocab_size"], bias=False)
        self.dk, self.base = c["head_dim"], c.get("rope_base", 10000.0)

    def forward(self, tokens):
        t = tokens.shape[1]
        inv = self.base ** (-torch.arange(0, self.dk, 2, dtype=torch.float64) / self.dk)
        ang = torch.arange(t, dtype=torch.float64)[:, None] * inv[None, :]
        cos = torch.cat((ang.cos(), ang.cos()), -1).float()
        sin = torch.cat((ang.sin(), ang.sin()), -1).float()
        mask = torch.full((t, t), float("-inf")).triu(1)
        x = self.embed(tokens)
        for blk in self.blocks:
            x = blk(x, cos, sin, mask)
        return self.head(self.norm(x))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup-steps", type=int, default=2)
    ap.add_argument("--gate", action="store_true", help="add the G1 elementwise sigmoid gate")
    ap.add_argument("--bf16", action="store_true", help="torch.autocast(cpu, bfloat16)")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    c = json.load(open(a.config))
    model = Model(c, a.gate)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1)
    tokens = torch.randint(0, c["vocab_size"], (a.batch_size, a.seq_len))
    targets = torch.randint(0, c["vocab_size"], (a.batch_size, a.seq_len))
    times = []
    for i in range(a.warmup_steps + a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            logits = model(tokens)
        loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))
        loss = loss + sum(b.moe.aux for b in model.blocks if b.moe is not None)  # MoE auxiliary losses
        loss.backward()
        opt.step()
        if i >= a.warmup_steps:
            times.append((time.perf_counter() - t0) * 1e3)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"step_ms": times, "peak_rss_bytes": rss, "loss": float(loss)}))


if __name__ == "__main__":
    main()
