#!/usr/bin/python3
"""A random Hugging Face checkpoint, stored in two shards with a model.safetensors.index.json,
written one tensor at a time (a few hundred MB of memory), for measuring `gatedlm import`,
`score`, `analyze` and `generate` at scale (bench/hf_scale.sh).

--arch paper (default): the gated-attention paper's layout, shaped like its 1.7B dense model
  (28 layers, d_model 2048, 16 heads, 8 KV heads, head_dim 128, FFN 6144, Qwen3's
  151936-token vocabulary, untied LM head, elementwise G1 gate fused into q_proj).
  Random weights: N(0, 0.02) matrices, ones for norms.
--arch qwen3_5: Qwen3.5 dense as released (model_type "qwen3_5": a multimodal wrapper, the
  language model's keys in text_config, its tensors under model.language_model.), with a few
  vision-tower (model.visual.*) and MTP (mtp.*) tensors the importer skips. --shape 2b
  (default) is Qwen3.5-2B's language model: 24 layers (full_attention_interval 4: 18 Gated
  DeltaNet, 6 gated softmax), hidden 2048, 8 heads / 2 KV heads of 256 (the gate's rows
  interleaved per head in q_proj), FFN 6144, linear layers 16 key / 16 value heads of 128,
  conv 4, vocabulary 248320, tied embeddings, rope_theta 1e7 over 0.25 of each head, about
  1.88 B parameters (3.8 GB as BF16). Those numbers are Qwen3.5-2B's config.json as quoted in
  public code found with the search tool (a test fixture of an MLX-style converter and a
  model-certification test, both naming Qwen/Qwen3.5-2B: hidden 2048, 24 layers, 8 / 2 heads,
  head_dim 256, intermediate 6144, linear 16 / 16 x 128, vocab 248320, rope_theta 1e7,
  partial_rotary_factor 0.25); tie_word_embeddings true and mrope_section [11, 11, 10] are
  Qwen3.5-0.8B's config (same family), not seen for the 2B. --shape 4b: Qwen3.5-4B's language
  model as quoted the same way (an MLX adapter's test of "the local Qwen3.5 4B topology"): 32
  layers, hidden 2560, 16 heads / 4 KV heads of 256, FFN 9216, linear layers 16 key / 32 value
  heads of 128 (twice the key heads, as every Qwen3.5 above 2B), vocabulary 248320; tied
  embeddings assumed as the smaller models; about 4.2 B parameters. --shape tiny: a few-MB smoke.
  Random weights: N(0, 0.02) matrices, zero-centred norms 0 (x * (1 + 0)), the gated norm
  and dt_bias 1, A_log 0.

Usage: /usr/bin/python3 bench/make_random_hf.py OUT_DIR [--layers 28] [--gate elementwise|headwise|none]
       /usr/bin/python3 bench/make_random_hf.py --arch qwen3_5 [--shape 2b|4b|tiny] [--dtype bf16|f32] --out DIR
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


# Qwen3.5 language-model shapes (see the docstring for where the 2b numbers come from).
QWEN35_SHAPES = {
    "2b": dict(layers=24, d_model=2048, heads=8, kv_heads=2, head_dim=256, ffn=6144, vocab=248320, lin_k=16,
               lin_v=16, lin_dk=128, lin_dv=128),
    "4b": dict(layers=32, d_model=2560, heads=16, kv_heads=4, head_dim=256, ffn=9216, vocab=248320, lin_k=16,
               lin_v=32, lin_dk=128, lin_dv=128),
    "tiny": dict(layers=4, d_model=64, heads=2, kv_heads=1, head_dim=32, ffn=96, vocab=1000, lin_k=2, lin_v=4,
                 lin_dk=16, lin_dv=16),
}


def qwen35_config(s):
    text = {"model_type": "qwen3_5_text", "vocab_size": s["vocab"], "hidden_size": s["d_model"],
            "intermediate_size": s["ffn"], "num_hidden_layers": s["layers"], "num_attention_heads": s["heads"],
            "num_key_value_heads": s["kv_heads"], "head_dim": s["head_dim"], "hidden_act": "silu",
            "max_position_embeddings": 262144, "rms_norm_eps": 1e-6, "tie_word_embeddings": True,
            "attention_bias": False, "attention_dropout": 0.0, "attn_output_gate": True, "full_attention_interval": 4,
            "layer_types": ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(s["layers"])],
            "linear_num_key_heads": s["lin_k"], "linear_num_value_heads": s["lin_v"],
            "linear_key_head_dim": s["lin_dk"], "linear_value_head_dim": s["lin_dv"], "linear_conv_kernel_dim": 4,
            "mtp_num_hidden_layers": 1, "mtp_use_dedicated_embeddings": False, "mamba_ssm_dtype": "float32",
            "initializer_range": 0.02, "use_cache": True, "eos_token_id": 248044, "dtype": "bfloat16",
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.25,
                                "mrope_section": [11, 11, 10], "mrope_interleaved": True}}
    return {"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5", "text_config": text,
            "vision_config": {"model_type": "qwen3_5_vision", "depth": 1, "hidden_size": 1024},
            "image_token_id": 248056, "video_token_id": 248057, "vision_start_token_id": 248053,
            "vision_end_token_id": 248054, "tie_word_embeddings": True, "transformers_version": "5.3.0"}


def qwen35_shapes(s):
    d, hd, nh, nkv = s["d_model"], s["head_dim"], s["heads"], s["kv_heads"]
    kd, vd = s["lin_k"] * s["lin_dk"], s["lin_v"] * s["lin_dv"]
    P = "model.language_model."
    out = [(P + "embed_tokens.weight", (s["vocab"], d))]
    for i in range(s["layers"]):
        p = f"{P}layers.{i}."
        out.append((p + "input_layernorm.weight", (d,)))
        if (i + 1) % 4 == 0:
            out += [(p + "self_attn.q_proj.weight", (2 * nh * hd, d)), (p + "self_attn.k_proj.weight", (nkv * hd, d)),
                    (p + "self_attn.v_proj.weight", (nkv * hd, d)), (p + "self_attn.o_proj.weight", (d, nh * hd)),
                    (p + "self_attn.q_norm.weight", (hd,)), (p + "self_attn.k_norm.weight", (hd,))]
        else:
            a = p + "linear_attn."
            out += [(a + "in_proj_qkv.weight", (2 * kd + vd, d)), (a + "in_proj_z.weight", (vd, d)),
                    (a + "in_proj_b.weight", (s["lin_v"], d)), (a + "in_proj_a.weight", (s["lin_v"], d)),
                    (a + "conv1d.weight", (2 * kd + vd, 1, 4)), (a + "dt_bias", (s["lin_v"],)),
                    (a + "A_log", (s["lin_v"],)), (a + "norm.weight", (s["lin_dv"],)), (a + "out_proj.weight", (d, vd))]
        out += [(p + "post_attention_layernorm.weight", (d,)), (p + "mlp.gate_proj.weight", (s["ffn"], d)),
                (p + "mlp.up_proj.weight", (s["ffn"], d)), (p + "mlp.down_proj.weight", (d, s["ffn"]))]
    out.append((P + "norm.weight", (d,)))
    # A token vision tower and MTP layer: real checkpoints hold more of both; the importer
    # skips every such tensor and reports how many.
    out += [("model.visual.patch_embed.proj.weight", (1024, 3, 2, 16, 16)), ("model.visual.blocks.0.attn.qkv.weight",
                                                                              (3072, 1024)),
            ("model.visual.merger.linear_fc2.weight", (d, 4096)), ("mtp.fc.weight", (d, 2 * d)),
            ("mtp.norm.weight", (d,))]
    return out


def fill_1d(name, arch):
    """The value of a vector: norms 1 (0 when zero-centred), the gated norm and dt_bias 1."""
    if arch == "paper" or name.endswith("linear_attn.norm.weight") or name.endswith("dt_bias"):
        return 1.0
    return 0.0  # zero-centred norms (x * (1 + 0)), A_log 0 (A = 1)


def encode(x, dtype):
    if dtype == "F32":
        return np.ascontiguousarray(x, dtype="<f4").tobytes()
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2").tobytes()


def write_shard(path, tensors, rng, arch="paper", dtype="BF16"):
    width = 4 if dtype == "F32" else 2
    header, pos = {}, 0
    for name, shape in tensors:
        n = int(np.prod(shape)) * width
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [pos, pos + n]}
        pos += n
    h = json.dumps(header).encode()
    h += b" " * ((-len(h)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for name, shape in tensors:
            if len(shape) == 1:
                f.write(encode(np.full(shape, fill_1d(name, arch), np.float32), dtype))
                continue
            row = int(np.prod(shape[1:]))  # [rows, everything else]
            rows_per_chunk = max(1, (1 << 24) // row)
            for r in range(0, shape[0], rows_per_chunk):
                rows = min(rows_per_chunk, shape[0] - r)
                f.write(encode(rng.standard_normal((rows, row), dtype=np.float32) * 0.02, dtype))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", nargs="?")
    ap.add_argument("--out", dest="out_flag", help="the output directory (or give it first)")
    ap.add_argument("--arch", default="paper", choices=["paper", "qwen3_5"])
    ap.add_argument("--shape", default="2b", choices=sorted(QWEN35_SHAPES), help="qwen3_5 only")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f32"])
    ap.add_argument("--layers", type=int, default=28)
    ap.add_argument("--d-model", type=int, default=2048)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--ffn", type=int, default=6144)
    ap.add_argument("--vocab", type=int, default=151936)
    ap.add_argument("--gate", default="elementwise", choices=["elementwise", "headwise", "none"])
    a = ap.parse_args()
    a.out = a.out_flag or a.out
    if not a.out:
        ap.error("the output directory is required (OUT_DIR or --out)")
    os.makedirs(a.out, exist_ok=True)
    if a.arch == "qwen3_5":
        cfg, tensors = qwen35_config(QWEN35_SHAPES[a.shape]), qwen35_shapes(QWEN35_SHAPES[a.shape])
    else:
        cfg, tensors = paper_config(a), shapes(a)
    write_checkpoint(a, cfg, tensors)


def paper_config(a):
    return {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": a.vocab,
           "hidden_size": a.d_model, "intermediate_size": a.ffn, "num_hidden_layers": a.layers,
           "num_attention_heads": a.heads, "num_key_value_heads": a.kv_heads, "head_dim": a.head_dim,
           "hidden_act": "silu", "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
           "rope_scaling": None, "tie_word_embeddings": False, "attention_bias": False, "use_qk_norm": True,
           "headwise_attn_output_gate": a.gate == "headwise",
           "elementwise_attn_output_gate": a.gate == "elementwise", "torch_dtype": "bfloat16"}


def write_checkpoint(a, cfg, tensors):
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    half = len(tensors) // 2
    rng = np.random.default_rng(0)
    weight_map = {}
    for s, part in enumerate((tensors[:half], tensors[half:])):
        fname = f"model-{s + 1:05d}-of-00002.safetensors"
        write_shard(os.path.join(a.out, fname), part, rng, a.arch, a.dtype.upper())
        weight_map.update({name: fname for name, _ in part})
    with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f, indent=2)
    total = sum(int(np.prod(s)) for _, s in tensors)
    print(f"{a.out}: {total / 1e9:.3f} B parameters ({a.arch}), {a.dtype.upper()}, 2 shards")


if __name__ == "__main__":
    main()
