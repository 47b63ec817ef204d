#!/usr/bin/python3
"""A random Hugging Face checkpoint in the gated-attention paper's layout, shaped like its
1.7B dense model by default (28 layers, d_model 2048, 16 heads, 8 KV heads, head_dim 128,
FFN 6144, Qwen3's 151936-token vocabulary, untied LM head, elementwise G1 gate fused into
q_proj), stored as BF16 in two shards with a model.safetensors.index.json. Written one
tensor at a time (a few hundred MB of memory), for measuring `gatedlm import`, `score` and
`analyze` at scale (bench/hf_scale.sh). Random weights: N(0, 0.02) matrices, ones for norms.

Usage: /usr/bin/python3 bench/make_random_hf.py OUT_DIR [--layers 28] [--gate elementwise|headwise|none]
"""
import argparse
import json
import os
import struct

import numpy as np


def shapes(a):
    d, hd, nh, nkv = a.d_model, a.head_dim, a.heads, a.kv_heads
    gate_rows = {"elementwise": nh * hd, "headwise": nh, "none": 0}[a.gate]
    out = [("model.embed_tokens.weight", (a.vocab, d))]
    for i in range(a.layers):
        p = f"model.layers.{i}."
        out += [(p + "input_layernorm.weight", (d,)),
                (p + "self_attn.q_proj.weight", (nh * hd + gate_rows, d)),
                (p + "self_attn.k_proj.weight", (nkv * hd, d)),
                (p + "self_attn.v_proj.weight", (nkv * hd, d)),
                (p + "self_attn.o_proj.weight", (d, nh * hd)),
                (p + "self_attn.q_norm.weight", (hd,)),
                (p + "self_attn.k_norm.weight", (hd,)),
                (p + "post_attention_layernorm.weight", (d,)),
                (p + "mlp.gate_proj.weight", (a.ffn, d)),
                (p + "mlp.up_proj.weight", (a.ffn, d)),
                (p + "mlp.down_proj.weight", (d, a.ffn))]
    out += [("model.norm.weight", (d,)), ("lm_head.weight", (a.vocab, d))]
    return out


def bf16_bytes(x):
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2").tobytes()


def write_shard(path, tensors, rng):
    header, pos = {}, 0
    for name, shape in tensors:
        n = int(np.prod(shape)) * 2
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [pos, pos + n]}
        pos += n
    h = json.dumps(header).encode()
    h += b" " * ((-len(h)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for name, shape in tensors:
            if len(shape) == 1:
                f.write(bf16_bytes(np.ones(shape, np.float32)))
                continue
            rows_per_chunk = max(1, (1 << 24) // shape[1])
            for r in range(0, shape[0], rows_per_chunk):
                rows = min(rows_per_chunk, shape[0] - r)
                f.write(bf16_bytes(rng.standard_normal((rows, shape[1]), dtype=np.float32) * 0.02))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=28)
    ap.add_argument("--d-model", type=int, default=2048)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--ffn", type=int, default=6144)
    ap.add_argument("--vocab", type=int, default=151936)
    ap.add_argument("--gate", default="elementwise", choices=["elementwise", "headwise", "none"])
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    cfg = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": a.vocab,
           "hidden_size": a.d_model, "intermediate_size": a.ffn, "num_hidden_layers": a.layers,
           "num_attention_heads": a.heads, "num_key_value_heads": a.kv_heads, "head_dim": a.head_dim,
           "hidden_act": "silu", "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
           "rope_scaling": None, "tie_word_embeddings": False, "attention_bias": False, "use_qk_norm": True,
           "headwise_attn_output_gate": a.gate == "headwise",
           "elementwise_attn_output_gate": a.gate == "elementwise", "torch_dtype": "bfloat16"}
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    tensors = shapes(a)
    half = len(tensors) // 2
    rng = np.random.default_rng(0)
    weight_map = {}
    for s, part in enumerate((tensors[:half], tensors[half:])):
        fname = f"model-{s + 1:05d}-of-00002.safetensors"
        write_shard(os.path.join(a.out, fname), part, rng)
        weight_map.update({name: fname for name, _ in part})
    with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f, indent=2)
    total = sum(int(np.prod(s)) for _, s in tensors)
    print(f"{a.out}: {total / 1e9:.3f} B parameters, BF16, 2 shards")


if __name__ == "__main__":
    main()
