"""An independent PyTorch reading of Hugging Face checkpoints in the two layouts gatedlm
imports and exports, written from the layout description of issue 12 (not from
gatedlm's code):

  qwen3  transformers' Qwen3: embedding, blocks of x += attn(rmsnorm(x)), x += swiglu(rmsnorm(x)),
         final rmsnorm, lm_head (or the embedding when tie_word_embeddings); grouped-query
         attention, per-head RMSNorm of q and k, rotate-half RoPE over the whole head;
         `attention_bias` puts a bias on q_proj, k_proj, v_proj and o_proj.
  paper  the gated-attention paper's checkpoints: the same, plus `use_qk_norm`, `qkv_bias`
         (like attention_bias) and a sigmoid gate on the SDPA output
         (`headwise_attn_output_gate`: one score per head; `elementwise_attn_output_gate`:
         one per element), multiplied in before o_proj. There is no gate tensor: q_proj's
         output rows are grouped per KV group; with G = heads / kv heads, group g holds the
         G*head_dim query rows of its heads, then their gate rows (G for headwise,
         G*head_dim for elementwise). QK-norm touches the query part only.
  qwen3_moe  (model_type "qwen3_moe", either layout above) transformers' Qwen3-MoE: layer i's
         FFN is sparse when i is not in `mlp_only_layers` and (i + 1) % `decoder_sparse_step`
         == 0: router `mlp.gate` [num_experts, d], softmax over all experts, the
         `num_experts_per_tok` largest probabilities (renormalised to sum 1 when
         `norm_topk_prob`), the output the so-weighted sum of the chosen experts' SwiGLU
         (`mlp.experts.{e}.{gate,up,down}_proj`, width `moe_intermediate_size`).

Also a safetensors reader and writer for F32, BF16 and F16, and the sharded index
(model.safetensors.index.json), for building test checkpoints.
"""
import json
import math
import os
import struct

import numpy as np
import torch

_WIDTH = {"F32": 4, "BF16": 2, "F16": 2}


def _decode(raw, dtype, shape):
    if dtype == "F32":
        arr = np.frombuffer(raw, dtype="<f4")
    elif dtype == "F16":
        arr = np.frombuffer(raw, dtype="<f2").astype(np.float32)
    elif dtype == "BF16":
        arr = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
    else:
        raise ValueError(f"dtype {dtype} not supported by this reader")
    return arr.reshape(shape).astype(np.float64)


def read_safetensors(path):
    """name -> (dtype, float64 numpy array)."""
    with open(path, "rb") as f:
        blob = f.read()
    (hlen,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + hlen])
    header.pop("__metadata__", None)
    data = blob[8 + hlen:]
    out = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        out[name] = (info["dtype"], _decode(data[b:e], info["dtype"], info["shape"]))
    return out


def read_hf_dir(directory):
    """(config dict, name -> float64 array) of a model directory, single file or sharded."""
    with open(os.path.join(directory, "config.json")) as f:
        cfg = json.load(f)
    single = os.path.join(directory, "model.safetensors")
    tensors = {}
    if os.path.exists(single):
        files = [single]
    else:
        with open(os.path.join(directory, "model.safetensors.index.json")) as f:
            files = sorted({os.path.join(directory, v) for v in json.load(f)["weight_map"].values()})
    for path in files:
        for name, (_, arr) in read_safetensors(path).items():
            tensors[name] = arr
    return cfg, tensors


def _encode(arr, dtype):
    a = np.ascontiguousarray(arr, dtype=np.float32)
    if dtype == "F32":
        return a.astype("<f4").tobytes()
    if dtype == "F16":
        return a.astype("<f2").tobytes()
    if dtype == "BF16":  # round to nearest even on the fp32 bits
        u = a.view(np.uint32).astype(np.uint64)
        u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
        return u.astype("<u2").tobytes()
    if dtype == "I32":
        return a.astype("<i4").tobytes()
    raise ValueError(dtype)


def write_safetensors(path, tensors, dtype="F32"):
    """tensors: name -> numpy array, stored as dtype (F32, BF16, F16; I32 for refusal tests)."""
    header, chunks, pos = {}, [], 0
    for name, arr in tensors.items():
        raw = _encode(arr, dtype)
        header[name] = {"dtype": dtype, "shape": list(np.shape(arr)), "data_offsets": [pos, pos + len(raw)]}
        chunks.append(raw)
        pos += len(raw)
    h = json.dumps(header).encode()
    h += b" " * ((-len(h)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for c in chunks:
            f.write(c)


def write_hf_dir(directory, cfg, tensors, dtype="F32", shards=1):
    """config.json and the weights (sharded into `shards` files with an index when > 1)."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    if shards == 1:
        write_safetensors(os.path.join(directory, "model.safetensors"), tensors, dtype)
        return
    names = list(tensors)
    weight_map = {}
    for s in range(shards):
        part = names[s::shards]
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        write_safetensors(os.path.join(directory, fname), {n: tensors[n] for n in part}, dtype)
        weight_map.update({n: fname for n in part})
    with open(os.path.join(directory, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f, indent=2)


# ---- the model ---------------------------------------------------------------------------

class Layout:
    """The shapes a config implies."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.d = cfg["hidden_size"]
        self.L = cfg["num_hidden_layers"]
        self.nh = cfg["num_attention_heads"]
        self.nkv = cfg.get("num_key_value_heads", self.nh)
        self.hd = cfg.get("head_dim", self.d // self.nh)
        self.ffn = cfg["intermediate_size"]
        self.V = cfg["vocab_size"]
        self.G = self.nh // self.nkv
        self.headwise = bool(cfg.get("headwise_attn_output_gate", False))
        self.elementwise = bool(cfg.get("elementwise_attn_output_gate", False))
        self.gate_width = 1 if self.headwise else self.hd if self.elementwise else 0  # gate rows per head
        self.bias = bool(cfg.get("attention_bias", False) or cfg.get("qkv_bias", False))
        self.qk_norm = bool(cfg.get("use_qk_norm", True))
        self.tied = bool(cfg.get("tie_word_embeddings", False))
        self.moe = cfg.get("model_type") == "qwen3_moe"
        self.E = cfg.get("num_experts", 0) if self.moe else 0
        self.top_k = cfg.get("num_experts_per_tok", 0)
        self.expert_ffn = cfg.get("moe_intermediate_size", 0)
        self.norm_topk = bool(cfg.get("norm_topk_prob", False))
        self.sparse_step = cfg.get("decoder_sparse_step", 1)
        self.dense_layers = set(cfg.get("mlp_only_layers", []))

    def sparse(self, i):
        return self.E > 0 and i not in self.dense_layers and (i + 1) % self.sparse_step == 0

    def q_rows(self):
        return self.nkv * self.G * (self.hd + self.gate_width)

    def shapes(self):
        d, hd = self.d, self.hd
        s = {"model.embed_tokens.weight": (self.V, d), "model.norm.weight": (d,)}
        if not self.tied:
            s["lm_head.weight"] = (self.V, d)
        for i in range(self.L):
            p = f"model.layers.{i}."
            s[p + "input_layernorm.weight"] = (d,)
            s[p + "post_attention_layernorm.weight"] = (d,)
            s[p + "self_attn.q_proj.weight"] = (self.q_rows(), d)
            s[p + "self_attn.k_proj.weight"] = (self.nkv * hd, d)
            s[p + "self_attn.v_proj.weight"] = (self.nkv * hd, d)
            s[p + "self_attn.o_proj.weight"] = (d, self.nh * hd)
            if self.bias:
                s[p + "self_attn.q_proj.bias"] = (self.q_rows(),)
                s[p + "self_attn.k_proj.bias"] = (self.nkv * hd,)
                s[p + "self_attn.v_proj.bias"] = (self.nkv * hd,)
                s[p + "self_attn.o_proj.bias"] = (d,)
            if self.qk_norm:
                s[p + "self_attn.q_norm.weight"] = (hd,)
                s[p + "self_attn.k_norm.weight"] = (hd,)
            if self.sparse(i):
                s[p + "mlp.gate.weight"] = (self.E, d)
                for e in range(self.E):
                    s[p + f"mlp.experts.{e}.gate_proj.weight"] = (self.expert_ffn, d)
                    s[p + f"mlp.experts.{e}.up_proj.weight"] = (self.expert_ffn, d)
                    s[p + f"mlp.experts.{e}.down_proj.weight"] = (d, self.expert_ffn)
                continue
            s[p + "mlp.gate_proj.weight"] = (self.ffn, d)
            s[p + "mlp.up_proj.weight"] = (self.ffn, d)
            s[p + "mlp.down_proj.weight"] = (d, self.ffn)
        return s


def random_tensors(cfg, seed, std=0.2):
    """Random weights for a config: matrices and biases N(0, std), norms 1 + 0.1 N."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in Layout(cfg).shapes().items():
        if name.endswith("norm.weight") or name.endswith("layernorm.weight"):
            out[name] = 1.0 + 0.1 * rng.standard_normal(shape)
        else:
            out[name] = std * rng.standard_normal(shape)
    return out


def _rms(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def _inv_freq(cfg, hd):
    theta = float(cfg.get("rope_theta", 10000.0))
    inv = 1.0 / theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    rs = cfg.get("rope_scaling")
    if rs:
        kind = rs.get("rope_type", rs.get("type"))
        if kind == "linear":
            inv = inv / rs["factor"]
        elif kind not in (None, "default"):
            raise ValueError(f"rope_scaling {kind} not in this reference")
    return inv


def _rope(x, cos, sin):
    """Rotate-half over the whole head: x [B, T, H, hd]."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)


def _swiglu(P, prefix, h):
    f = torch.nn.functional.silu(h @ P[prefix + "gate_proj.weight"].T) * (h @ P[prefix + "up_proj.weight"].T)
    return f @ P[prefix + "down_proj.weight"].T


def _sparse_ffn(lay, P, prefix, h):
    """Qwen3-MoE's sparse block, token by token: h [B, T, d]."""
    probs = torch.softmax(h @ P[prefix + "gate.weight"].T, dim=-1)  # [B, T, E]
    weights, chosen = probs.topk(lay.top_k, dim=-1)
    if lay.norm_topk:
        weights = weights / weights.sum(-1, keepdim=True)
    out = torch.zeros_like(h)
    for e in range(lay.E):
        w = (weights * (chosen == e)).sum(-1, keepdim=True)  # 0 where e was not chosen
        if bool((chosen == e).any()):
            out = out + w * _swiglu(P, prefix + f"experts.{e}.", h)
    return out


def _visible(cfg, i, T):
    """[T, T] keys query t sees in layer i, as transformers' Qwen3 decides: causal, and on a
    sliding layer (use_sliding_window with a window; layer_types, else layers from
    max_window_layers on) only t - sliding_window < j."""
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    W = cfg.get("sliding_window") if cfg.get("use_sliding_window") else None
    if W is None:
        return causal
    types = cfg.get("layer_types")
    sliding = types[i] == "sliding_attention" if types else i >= cfg.get("max_window_layers", 28)
    return causal & ~torch.ones(T, T, dtype=torch.bool).tril(-W) if sliding else causal


def logits(cfg, tensors, tokens):
    """tokens [B, T] int -> logits [B, T, V] float64."""
    lay = Layout(cfg)
    P = {k: torch.from_numpy(np.asarray(v, dtype=np.float64)) for k, v in tensors.items()}
    eps = float(cfg.get("rms_norm_eps", 1e-6))
    tokens = torch.as_tensor(tokens, dtype=torch.long)
    B, T = tokens.shape
    hd, nh, nkv, G, gw = lay.hd, lay.nh, lay.nkv, lay.G, lay.gate_width
    ang = torch.arange(T, dtype=torch.float64)[:, None] * _inv_freq(cfg, hd)[None, :]
    cos, sin = torch.cos(ang), torch.sin(ang)
    x = P["model.embed_tokens.weight"][tokens]
    for i in range(lay.L):
        p = f"model.layers.{i}."
        lin = lambda name, h: h @ P[p + name + ".weight"].T + (P[p + name + ".bias"] if lay.bias else 0)  # noqa: E731
        h = _rms(x, P[p + "input_layernorm.weight"], eps)
        qg = lin("self_attn.q_proj", h).reshape(B, T, nkv, G * (hd + gw))
        q = qg[..., :G * hd].reshape(B, T, nh, hd)  # head g*G + j of group g
        gate = qg[..., G * hd:].reshape(B, T, nh, gw) if gw else None
        k = lin("self_attn.k_proj", h).reshape(B, T, nkv, hd)
        v = lin("self_attn.v_proj", h).reshape(B, T, nkv, hd)
        if lay.qk_norm:
            q = _rms(q, P[p + "self_attn.q_norm.weight"], eps)
            k = _rms(k, P[p + "self_attn.k_norm.weight"], eps)
        q, k = _rope(q, cos, sin), _rope(k, cos, sin)
        k = k.repeat_interleave(G, dim=2)
        v = v.repeat_interleave(G, dim=2)
        s = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(hd)
        s = s.masked_fill(~_visible(cfg, i, T), float("-inf"))
        y = torch.einsum("bhqk,bkhd->bqhd", torch.softmax(s, -1), v)
        if gate is not None:
            y = y * torch.sigmoid(gate)
        x = x + lin("self_attn.o_proj", y.reshape(B, T, nh * hd))
        h2 = _rms(x, P[p + "post_attention_layernorm.weight"], eps)
        x = x + (_sparse_ffn(lay, P, p + "mlp.", h2) if lay.sparse(i) else _swiglu(P, p + "mlp.", h2))
    x = _rms(x, P["model.norm.weight"], eps)
    head = P["model.embed_tokens.weight"] if lay.tied else P["lm_head.weight"]
    return x @ head.T
