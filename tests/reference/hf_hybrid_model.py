"""An independent PyTorch reading of the hybrid Hugging Face checkpoints gatedlm imports and
exports (transformers' qwen3_next, qwen3_5, qwen3_5_moe), written from transformers'
description of them, reading the Hugging Face tensors by their own names and fused layouts
(not through gatedlm's name tables). The linear layers' delta rule, causal convolution and
L2 normalisation come from hybrid_reference.py.

  config   a text model's keys at the top level, or a multimodal wrapper ("qwen3_5",
           "qwen3_5_moe") with them in "text_config"; then the tensors are named
           "model.language_model.*" (else "model.*"), and the wrapper also holds the vision
           tower "model.visual.*"; "mtp.*" are multi-token-prediction layers (not run here).
  norms    every RMSNorm computes x_hat * (1 + w), except the linear layers' gated norm
           (x_hat * w * SiLU(z)).
  softmax  q_proj [2 * heads * head_dim, d]: per head, head_dim query rows then head_dim
  layers   gate rows; q_norm / k_norm per head; rotate-half RoPE over the first
           partial_rotary_factor * head_dim dims (theta from rope_parameters); GQA; the
           SDPA output times sigmoid(gate), then o_proj. attention_bias: q (with the gate's
           rows), k, v and o biases.
  linear   qwen3_5*: in_proj_qkv (q | k | v), in_proj_z, in_proj_b, in_proj_a.
  layers   qwen3_next: in_proj_qkvz, per key head j: q_j (d_k) k_j (d_k) v (r*d_v) z (r*d_v),
           and in_proj_ba per key head: b (r) a (r), r = value heads per key head.
           Then conv1d over q|k|v, SiLU, L2-normalised q (/sqrt(d_k)) and k, beta =
           sigmoid(b), g = -exp(A_log) softplus(a + dt_bias), the gated delta rule,
           RMSNorm(o) * norm.weight * SiLU(z), out_proj.
  FFN      dense SwiGLU (mlp.{gate,up,down}_proj), or the sparse block of Qwen2-MoE:
           softmax router mlp.gate, top-k (renormalised when norm_topk_prob; always in
           qwen3_5_moe), experts per tensor (qwen3_next: mlp.experts.{e}.*) or stacked
           (qwen3_5_moe: mlp.experts.gate_up_proj [E, 2I, d] = gate rows then up rows,
           mlp.experts.down_proj [E, d, I]), plus sigmoid(h mlp.shared_expert_gate^T) times
           the shared expert. Qwen3-Next layer i is sparse when (i + 1) % decoder_sparse_step
           == 0 (and num_experts > 0).
"""
import math

import numpy as np
import torch
import torch.nn.functional as F

import hybrid_reference as hy

TEXT_TYPES = {"qwen3_next": "qwen3_next", "qwen3_5": "qwen3_5", "qwen3_5_text": "qwen3_5",
              "qwen3_5_moe": "qwen3_5_moe", "qwen3_5_moe_text": "qwen3_5_moe"}


class HybridLayout:
    """What a hybrid config implies, read with transformers' defaults."""

    def __init__(self, cfg, stacked=None):
        self.nested = "text_config" in cfg
        t = cfg["text_config"] if self.nested else cfg
        self.fmt = TEXT_TYPES[cfg["model_type"]]
        self.prefix = "model.language_model." if self.nested else "model."
        self.d, self.L, self.V = t["hidden_size"], t["num_hidden_layers"], t["vocab_size"]
        self.nh = t["num_attention_heads"]
        self.nkv = t.get("num_key_value_heads", self.nh)
        self.hd = t.get("head_dim", 256)
        self.ffn = t.get("intermediate_size", 0)
        self.eps = t.get("rms_norm_eps", 1e-6)
        self.tied = cfg.get("tie_word_embeddings", t.get("tie_word_embeddings", False))
        self.bias = t.get("attention_bias", False)
        rope = t.get("rope_parameters") or {}
        self.theta = rope.get("rope_theta", t.get("rope_theta", 10000.0))
        self.rot = int(self.hd * rope.get("partial_rotary_factor", t.get("partial_rotary_factor", 0.25)))
        interval = t.get("full_attention_interval", 4)
        self.kinds = t.get("layer_types") or ["full_attention" if (i + 1) % interval == 0 else "linear_attention"
                                              for i in range(self.L)]
        self.nk, self.nv = t.get("linear_num_key_heads", 16), t.get("linear_num_value_heads", 32)
        self.dk, self.dv = t.get("linear_key_head_dim", 128), t.get("linear_value_head_dim", 128)
        self.K = t.get("linear_conv_kernel_dim", 4)
        moe_default = {"qwen3_next": 512, "qwen3_5_moe": 256}.get(self.fmt, 0)
        self.E = t.get("num_experts", moe_default) if self.fmt != "qwen3_5" else 0
        self.top_k = t.get("num_experts_per_tok", 8)
        self.I = t.get("moe_intermediate_size", 512)
        self.S = t.get("shared_expert_intermediate_size", 512)
        self.step = t.get("decoder_sparse_step", 1)
        self.norm_topk = True if self.fmt == "qwen3_5_moe" else t.get("norm_topk_prob", True)
        # Experts stacked (Qwen3.5-MoE's storage) or one tensor each (Qwen3-Next's); either
        # format may come in the other's storage.
        self.stacked = self.fmt == "qwen3_5_moe" if stacked is None else stacked

    def linear(self, i):
        return self.kinds[i] == "linear_attention"

    def sparse(self, i):
        return self.E > 0 and (i + 1) % self.step == 0

    def mixer_shapes(self, p, i):
        d, hd = self.d, self.hd
        if not self.linear(i):
            s = {p + "self_attn.q_proj.weight": (2 * self.nh * hd, d), p + "self_attn.k_proj.weight": (self.nkv * hd, d),
                 p + "self_attn.v_proj.weight": (self.nkv * hd, d), p + "self_attn.o_proj.weight": (d, self.nh * hd),
                 p + "self_attn.q_norm.weight": (hd,), p + "self_attn.k_norm.weight": (hd,)}
            if self.bias:
                s.update({p + "self_attn.q_proj.bias": (2 * self.nh * hd,), p + "self_attn.k_proj.bias": (self.nkv * hd,),
                          p + "self_attn.v_proj.bias": (self.nkv * hd,), p + "self_attn.o_proj.bias": (d,)})
            return s
        kd, vd, a = self.nk * self.dk, self.nv * self.dv, p + "linear_attn."
        s = {a + "conv1d.weight": (2 * kd + vd, 1, self.K), a + "dt_bias": (self.nv,), a + "A_log": (self.nv,),
             a + "norm.weight": (self.dv,), a + "out_proj.weight": (d, vd)}
        if self.fmt == "qwen3_next":
            s.update({a + "in_proj_qkvz.weight": (2 * kd + 2 * vd, d), a + "in_proj_ba.weight": (2 * self.nv, d)})
        else:
            s.update({a + "in_proj_qkv.weight": (2 * kd + vd, d), a + "in_proj_z.weight": (vd, d),
                      a + "in_proj_b.weight": (self.nv, d), a + "in_proj_a.weight": (self.nv, d)})
        return s

    def ffn_shapes(self, p, i):
        d, m = self.d, p + "mlp."
        if not self.sparse(i):
            return {m + "gate_proj.weight": (self.ffn, d), m + "up_proj.weight": (self.ffn, d),
                    m + "down_proj.weight": (d, self.ffn)}
        s = {m + "gate.weight": (self.E, d), m + "shared_expert.gate_proj.weight": (self.S, d),
             m + "shared_expert.up_proj.weight": (self.S, d), m + "shared_expert.down_proj.weight": (d, self.S),
             m + "shared_expert_gate.weight": (1, d)}
        if self.stacked:
            s.update({m + "experts.gate_up_proj": (self.E, 2 * self.I, d), m + "experts.down_proj": (self.E, d, self.I)})
        else:
            for e in range(self.E):
                s.update({m + f"experts.{e}.gate_proj.weight": (self.I, d), m + f"experts.{e}.up_proj.weight": (self.I, d),
                          m + f"experts.{e}.down_proj.weight": (d, self.I)})
        return s

    def shapes(self):
        P = self.prefix
        s = {P + "embed_tokens.weight": (self.V, self.d), P + "norm.weight": (self.d,)}
        if not self.tied:
            s["lm_head.weight"] = (self.V, self.d)
        for i in range(self.L):
            p = f"{P}layers.{i}."
            s.update({p + "input_layernorm.weight": (self.d,), p + "post_attention_layernorm.weight": (self.d,)})
            s.update(self.mixer_shapes(p, i))
            s.update(self.ffn_shapes(p, i))
        return s


# Tensors a released checkpoint holds besides the language model (the importer skips them).
EXTRA_SHAPES = {"model.visual.patch_embed.proj.weight": (16, 3, 2, 4, 4), "model.visual.blocks.0.attn.qkv.weight": (48, 16),
                "model.visual.merger.linear_fc2.weight": (32, 64), "mtp.fc.weight": (32, 64),
                "mtp.layers.0.input_layernorm.weight": (32,)}


def random_tensors(cfg, seed, std=0.2, extras=False, stacked=None):
    """Random weights: matrices N(0, std), zero-centred norms N(0, 0.1), the gated norm
    1 + 0.1 N, A_log N(-2, 0.5) and dt_bias N(0, 0.5) (decays mostly 0.5 .. 0.95)."""
    rng = np.random.default_rng(seed)
    out = {}
    shapes = HybridLayout(cfg, stacked).shapes()
    if extras:
        shapes.update(EXTRA_SHAPES)
    for name, shape in shapes.items():
        if name.endswith("linear_attn.norm.weight"):
            out[name] = 1.0 + 0.1 * rng.standard_normal(shape)
        elif name.endswith("norm.weight"):
            out[name] = 0.1 * rng.standard_normal(shape)
        elif name.endswith("A_log"):
            out[name] = -2.0 + 0.5 * rng.standard_normal(shape)
        elif name.endswith("dt_bias"):
            out[name] = 0.5 * rng.standard_normal(shape)
        else:
            out[name] = std * rng.standard_normal(shape)
    return out


def _zc_rms(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (1.0 + w)


def _rope(x, cos, sin, rot):
    """Rotate-half over the first rot dims of each head: x [B, T, H, hd]."""
    xr, rest = x[..., :rot], x[..., rot:]
    half = rot // 2
    x1, x2 = xr[..., :half], xr[..., half:]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s, rest], dim=-1)


def _attention(lay, W, p, h, cos, sin):
    B, T, _ = h.shape
    hd, nh, nkv = lay.hd, lay.nh, lay.nkv
    lin = lambda n, x: x @ W[p + n + ".weight"].T + (W[p + n + ".bias"] if lay.bias else 0)  # noqa: E731
    qg = lin("self_attn.q_proj", h).reshape(B, T, nh, 2 * hd)
    q, gate = qg[..., :hd], qg[..., hd:]
    k = lin("self_attn.k_proj", h).reshape(B, T, nkv, hd)
    v = lin("self_attn.v_proj", h).reshape(B, T, nkv, hd)
    q = _zc_rms(q, W[p + "self_attn.q_norm.weight"], lay.eps)
    k = _zc_rms(k, W[p + "self_attn.k_norm.weight"], lay.eps)
    q, k = _rope(q, cos, sin, lay.rot), _rope(k, cos, sin, lay.rot)
    k, v = k.repeat_interleave(nh // nkv, dim=2), v.repeat_interleave(nh // nkv, dim=2)
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(hd)
    s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    y = torch.einsum("bhqk,bkhd->bqhd", torch.softmax(s, -1), v) * torch.sigmoid(gate)
    return lin("self_attn.o_proj", y.reshape(B, T, nh * hd))


def _linear_inputs(lay, W, a, h):
    """q, k [B, T, n_k, d_k], v, z [B, T, n_v, d_v], b, a [B, T, n_v] before the convolution."""
    B, T, _ = h.shape
    r = lay.nv // lay.nk
    if lay.fmt == "qwen3_next":  # per key head: q k v z, and b a
        qkvz = (h @ W[a + "in_proj_qkvz.weight"].T).reshape(B, T, lay.nk, 2 * lay.dk + 2 * r * lay.dv)
        q, k, v, z = torch.split(qkvz, [lay.dk, lay.dk, r * lay.dv, r * lay.dv], dim=-1)
        ba = (h @ W[a + "in_proj_ba.weight"].T).reshape(B, T, lay.nk, 2 * r)
        b, a_ = torch.split(ba, [r, r], dim=-1)
        return (q, k, v.reshape(B, T, lay.nv, lay.dv), z.reshape(B, T, lay.nv, lay.dv),
                b.reshape(B, T, lay.nv), a_.reshape(B, T, lay.nv))
    kd = lay.nk * lay.dk
    q, k, v = torch.split(h @ W[a + "in_proj_qkv.weight"].T, [kd, kd, lay.nv * lay.dv], dim=-1)
    return (q.reshape(B, T, lay.nk, lay.dk), k.reshape(B, T, lay.nk, lay.dk), v.reshape(B, T, lay.nv, lay.dv),
            (h @ W[a + "in_proj_z.weight"].T).reshape(B, T, lay.nv, lay.dv),
            h @ W[a + "in_proj_b.weight"].T, h @ W[a + "in_proj_a.weight"].T)


def _gated_deltanet(lay, W, p, h):
    B, T, _ = h.shape
    a = p + "linear_attn."
    q, k, v, z, b, a_in = _linear_inputs(lay, W, a, h)
    mixed = torch.cat([q.reshape(B, T, -1), k.reshape(B, T, -1), v.reshape(B, T, -1)], dim=-1)
    mixed = F.silu(hy.causal_depthwise_conv(mixed, W[a + "conv1d.weight"]))
    kd = lay.nk * lay.dk
    q, k, v = torch.split(mixed, [kd, kd, lay.nv * lay.dv], dim=-1)
    q = hy.l2_normalize(q.reshape(B, T, lay.nk, lay.dk)) / math.sqrt(lay.dk)
    k = hy.l2_normalize(k.reshape(B, T, lay.nk, lay.dk))
    beta = torch.sigmoid(b)
    g = -torch.exp(W[a + "A_log"]) * F.softplus(a_in + W[a + "dt_bias"])
    o, _ = hy.delta_rule(q, k, v.reshape(B, T, lay.nv, lay.dv), g, beta, chunk_size=None)
    y = o * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + lay.eps) * W[a + "norm.weight"] * F.silu(z)
    return y.reshape(B, T, -1) @ W[a + "out_proj.weight"].T


def _swiglu(gate_w, up_w, down_w, h):
    return (F.silu(h @ gate_w.T) * (h @ up_w.T)) @ down_w.T


def _expert(lay, W, m, e, h):
    if lay.stacked:
        gu = W[m + "experts.gate_up_proj"][e]
        return _swiglu(gu[:lay.I], gu[lay.I:], W[m + "experts.down_proj"][e], h)
    return _swiglu(*(W[m + f"experts.{e}.{n}_proj.weight"] for n in ("gate", "up", "down")), h)


def _ffn(lay, W, p, i, h):
    m = p + "mlp."
    if not lay.sparse(i):
        return _swiglu(W[m + "gate_proj.weight"], W[m + "up_proj.weight"], W[m + "down_proj.weight"], h)
    probs = torch.softmax(h @ W[m + "gate.weight"].T, dim=-1)
    weights, chosen = probs.topk(lay.top_k, dim=-1)
    if lay.norm_topk:
        weights = weights / weights.sum(-1, keepdim=True)
    out = torch.zeros_like(h)
    for e in range(lay.E):
        if bool((chosen == e).any()):
            out = out + (weights * (chosen == e)).sum(-1, keepdim=True) * _expert(lay, W, m, e, h)
    shared = _swiglu(*(W[m + f"shared_expert.{n}_proj.weight"] for n in ("gate", "up", "down")), h)
    return out + torch.sigmoid(h @ W[m + "shared_expert_gate.weight"].T) * shared


def logits(cfg, tensors, tokens):
    """tokens [B, T] int -> logits [B, T, V] float64, from the Hugging Face tensors (the
    experts' storage read from their names)."""
    lay = HybridLayout(cfg, stacked=any(n.endswith("mlp.experts.gate_up_proj") for n in tensors))
    W = {k: torch.from_numpy(np.asarray(v, dtype=np.float64)) for k, v in tensors.items()}
    tokens = torch.as_tensor(tokens, dtype=torch.long)
    T = tokens.shape[1]
    inv = 1.0 / lay.theta ** (torch.arange(0, lay.rot, 2, dtype=torch.float64) / lay.rot)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
    cos, sin = torch.cos(ang), torch.sin(ang)
    P = lay.prefix
    x = W[P + "embed_tokens.weight"][tokens]
    for i in range(lay.L):
        p = f"{P}layers.{i}."
        h = _zc_rms(x, W[p + "input_layernorm.weight"], lay.eps)
        x = x + (_gated_deltanet(lay, W, p, h) if lay.linear(i) else _attention(lay, W, p, h, cos, sin))
        x = x + _ffn(lay, W, p, i, _zc_rms(x, W[p + "post_attention_layernorm.weight"], lay.eps))
    x = _zc_rms(x, W[P + "norm.weight"], lay.eps)
    return x @ (W[P + "embed_tokens.weight"] if lay.tied else W["lm_head.weight"]).T
