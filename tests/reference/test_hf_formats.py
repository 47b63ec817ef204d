#!/usr/bin/python3
"""gatedlm import / export against an independent PyTorch reading of the Hugging Face
layouts (hf_layout_model.py, written from the layout description, not from the engine).

For each case, random weights in a Hugging Face directory (qwen3 or the paper's fused
q|gate layout; G = 1, 2, 4; headwise and elementwise; with and without biases; dense and
Qwen3-MoE FFNs; F32, BF16, F16; single file and sharded):
  1. gatedlm import -> the engine's logits (gatedlm debug grads) match the reference's on
     the same stored weights (relative L2 <= 1e-4, reference in float64);
  2. gatedlm export --format <same> --dtype f32 -> the reference reads the exported files
     and matches the engine's logits (<= 1e-4);
  3. gatedlm import of that export gives back the checkpoint bit for bit (every tensor, and
     config.json);
and the refusals: each names the key or tensor at fault and writes nothing.

Usage: /usr/bin/python3 tests/reference/test_hf_formats.py --gatedlm build/gatedlm [--workdir DIR]
"""
import argparse
import copy
import json
import os
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402

import hf_layout_model as hf  # noqa: E402
from engine_harness import work_directory  # noqa: E402

TOL = 1e-4
B, T = 2, 10

BASE = {"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "vocab_size": 53, "hidden_size": 32,
        "intermediate_size": 40, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 8, "hidden_act": "silu", "max_position_embeddings": 64, "rms_norm_eps": 1e-6,
        "rope_theta": 1000.0, "rope_scaling": None, "tie_word_embeddings": False, "attention_bias": False,
        "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": True, "bos_token_id": 1,
        "eos_token_id": 2, "attention_dropout": 0.0, "use_sliding_window": False, "sliding_window": None,
        "max_window_layers": 2}


DROP = object()  # an override that removes the key


def paper(headwise=False, elementwise=False, use_qk_norm=True, **kw):
    return dict(use_qk_norm=use_qk_norm, headwise_attn_output_gate=headwise, elementwise_attn_output_gate=elementwise,
                **kw)


def moe(**kw):
    """transformers' Qwen3-MoE keys (hf_layout_model.py has the sparse block)."""
    return {**dict(model_type="qwen3_moe", architectures=["Qwen3MoeForCausalLM"], moe_intermediate_size=12,
                   decoder_sparse_step=1, norm_topk_prob=False, mlp_only_layers=[], router_aux_loss_coef=0.001,
                   output_router_logits=False), **kw}


# name -> (format, config overrides, stored dtype, shards)
CASES = {
    "qwen3_gqa2_bf16": ("qwen3", {}, "BF16", 1),
    "qwen3_mha_bias_f16_sharded": ("qwen3", dict(num_key_value_heads=4, attention_bias=True), "F16", 3),
    "qwen3_tied_linear_rope": ("qwen3", dict(tie_word_embeddings=True,
                                             rope_scaling={"rope_type": "linear", "factor": 2.0}), "F32", 1),
    "paper_baseline": ("paper", paper(), "BF16", 1),
    "paper_headwise_G1": ("paper", paper(headwise=True, num_key_value_heads=4), "F32", 1),
    "paper_headwise_G2": ("paper", paper(headwise=True), "BF16", 2),
    "paper_headwise_G4_qkv_bias": ("paper", paper(headwise=True, num_key_value_heads=1, qkv_bias=True,
                                                         attention_bias=DROP), "F32", 1),
    "paper_elementwise_G1_bias": ("paper", paper(elementwise=True, num_key_value_heads=4, attention_bias=True),
                                  "F16", 1),
    "paper_elementwise_G2": ("paper", paper(elementwise=True), "F32", 1),
    "paper_elementwise_G4_sharded": ("paper", paper(elementwise=True, num_key_value_heads=1), "BF16", 2),
    "qwen3_moe_every_layer_norm_topk": ("qwen3", moe(num_experts=4, num_experts_per_tok=2, norm_topk_prob=True),
                                        "BF16", 2),
    "qwen3_moe_step2_unnormalised": ("qwen3", moe(num_experts=5, num_experts_per_tok=3, decoder_sparse_step=2),
                                     "F32", 1),
    "paper_headwise_moe": ("paper", {**paper(headwise=True), **moe(num_experts=3, num_experts_per_tok=1)}, "F32", 1),
    # Sliding windows (transformers' Qwen3 rules): listed layers, and max_window_layers.
    "qwen3_sliding_layer_types": ("qwen3", dict(num_hidden_layers=3, use_sliding_window=True, sliding_window=4,
                                                layer_types=["sliding_attention", "full_attention",
                                                             "sliding_attention"]), "F32", 1),
    "qwen3_sliding_max_window_layers": ("qwen3", dict(use_sliding_window=True, sliding_window=3, max_window_layers=1),
                                        "BF16", 1),
    "paper_elementwise_no_qknorm": ("paper", paper(elementwise=True, use_qk_norm=False, num_attention_heads=8,
                                                   head_dim=4), "F32", 1),
}


def run(args, check=True):
    p = subprocess.run(args, capture_output=True, text=True, timeout=300)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({p.returncode}):\n{p.stderr}")
    return p


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


def engine_logits(binary, ckpt, tokens, work):
    tok = os.path.join(work, "tokens.txt")
    with open(tok, "w") as f:
        for row in tokens:
            f.write(" ".join(map(str, row)) + "\n")
    out = os.path.join(work, "engine.safetensors")
    run([binary, "debug", "grads", "--checkpoint", ckpt, "--token-ids", tok, "--out", out])
    return hf.read_safetensors(out)["logits"][1]


def checkpoint_tensors(ckpt):
    return {k: v for k, (_, v) in hf.read_safetensors(os.path.join(ckpt, "model.safetensors")).items()}


def check_case(binary, name, work, failures):
    fmt, over, dtype, shards = CASES[name]
    cfg = {k: v for k, v in {**copy.deepcopy(BASE), **over}.items() if v is not DROP}
    src, ck, exp, back = (os.path.join(work, name, x) for x in ("hf", "ckpt", "export", "reimport"))
    tensors = hf.random_tensors(cfg, seed=sum(map(ord, name)))
    if cfg.get("tie_word_embeddings"):
        tensors.pop("lm_head.weight", None)
    hf.write_hf_dir(src, cfg, tensors, dtype, shards)
    stored = hf.read_hf_dir(src)[1]  # the weights as rounded to the stored dtype
    tokens = np.random.default_rng(len(name)).integers(0, cfg["vocab_size"], size=(B, T))
    ref = hf.logits(cfg, stored, tokens).numpy()

    run([binary, "import", src, "--out", ck])
    got = engine_logits(binary, ck, tokens, os.path.join(work, name))
    e_import = rel(got, ref)

    run([binary, "export", ck, "--format", fmt, "--out", exp, "--dtype", "f32"])
    ecfg, etensors = hf.read_hf_dir(exp)
    e_export = rel(got, hf.logits(ecfg, etensors, tokens).numpy())

    run([binary, "import", exp, "--out", back, "--format", fmt])
    a, b = checkpoint_tensors(ck), checkpoint_tensors(back)
    identical = a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    with open(os.path.join(ck, "config.json")) as f1, open(os.path.join(back, "config.json")) as f2:
        same_config = json.load(f1) == json.load(f2)
    ok = e_import <= TOL and e_export <= TOL and identical and same_config
    print(f"{name:32s} {fmt:5s} {dtype:4s} shards {shards}  import {e_import:.2e}  export {e_export:.2e}  "
          f"round trip {'bit-identical' if identical and same_config else 'DIFFERS'}  {'PASS' if ok else 'FAIL'}")
    if not ok:
        failures.append(name)


def expect_refusal(binary, label, args, needle, out_dir, failures):
    p = run([binary] + args, check=False)
    ok = p.returncode != 0 and needle in p.stderr and not os.path.exists(out_dir)
    print(f"refuses {label:44s} {'PASS' if ok else 'FAIL'}  ({p.stderr.strip().splitlines()[-1] if p.stderr.strip() else 'no message'})")
    if not ok:
        failures.append("refusal: " + label)


def check_refusals(binary, work, failures):
    base = os.path.join(work, "refuse")
    cfg = {**copy.deepcopy(BASE), **paper(headwise=True)}
    good = hf.random_tensors(cfg, seed=5)

    def variant(tag, cfg_over=None, drop=None, add=None, reshape=None, dtype="F32"):
        c = {**cfg, **(cfg_over or {})}
        t = dict(good)
        if drop:
            t.pop(drop)
        if add:
            t[add] = np.zeros(3)
        if reshape:
            t[reshape] = t[reshape][:-1]
        d = os.path.join(base, tag)
        hf.write_hf_dir(d, c, t, dtype)
        return d

    out = os.path.join(base, "out")
    cases = [
        ("an unknown config key", variant("key", {"rope_magic": 3}), "rope_magic"),
        ("a different model_type", variant("type", {"model_type": "llama"}), "model_type"),
        ("a non-silu activation", variant("act", {"hidden_act": "gelu"}), "hidden_act"),
        ("a layer kind Qwen3 does not have", variant("swa", {"use_sliding_window": True, "sliding_window": 4,
                                                             "layer_types": ["sliding_attention", "chunked_attention"]}),
         "layer_types"),
        ("an unsupported rope_scaling", variant("rope", {"rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}),
         "rope_scaling"),
        ("both gate kinds at once", variant("gates", {"elementwise_attn_output_gate": True}),
         "elementwise_attn_output_gate"),
        ("a missing tensor", variant("missing", drop="model.layers.1.self_attn.k_proj.weight"),
         "model.layers.1.self_attn.k_proj.weight"),
        ("an unexpected tensor", variant("extra", add="model.layers.0.self_attn.q_proj.bias"),
         "model.layers.0.self_attn.q_proj.bias"),
        ("a wrong shape", variant("shape", reshape="model.layers.0.self_attn.q_proj.weight"),
         "model.layers.0.self_attn.q_proj.weight"),
        ("an integer dtype", variant("dtype", dtype="I32"), "I32"),
    ]
    for label, src, needle in cases:
        expect_refusal(binary, label, ["import", src, "--out", out], needle, out, failures)
    moe_cfg = {**copy.deepcopy(BASE), **moe(num_experts=4, num_experts_per_tok=2)}
    moe_good = hf.random_tensors(moe_cfg, seed=6)
    for label, over, needle in [
            ("Qwen3-MoE dense layers by list", {"mlp_only_layers": [0]}, "mlp_only_layers"),
            ("a Qwen2-MoE shared expert", {"shared_expert_intermediate_size": 16}, "shared_expert_intermediate_size"),
            ("Qwen3-MoE without num_experts", {"num_experts": DROP}, "num_experts")]:
        d = os.path.join(base, "moe_" + label.split()[0] + str(len(label)))
        hf.write_hf_dir(d, {k: v for k, v in {**moe_cfg, **over}.items() if v is not DROP}, moe_good)
        expect_refusal(binary, label, ["import", d, "--out", out], needle, out, failures)
    expect_refusal(binary, "paper keys under --format qwen3", ["import", variant("fmt"), "--out", out,
                                                               "--format", "qwen3"], "belongs to the paper's layout",
                   out, failures)
    # A sharded index naming a shard that is not there.
    sharded = os.path.join(base, "sharded")
    hf.write_hf_dir(sharded, cfg, good, "F32", shards=2)
    os.remove(os.path.join(sharded, "model-00002-of-00002.safetensors"))
    expect_refusal(binary, "a missing shard", ["import", sharded, "--out", out], "model-00002-of-00002", out,
                   failures)
    # Export: a gated model as qwen3, a non-G1 gate as paper.
    ck = os.path.join(base, "gated_ckpt")
    run([binary, "import", variant("ok"), "--out", ck])
    expect_refusal(binary, "export --format qwen3 of a gated model", ["export", ck, "--format", "qwen3", "--out", out],
                   "gate", out, failures)
    g5 = os.path.join(base, "g5.json")
    with open(g5, "w") as f:
        json.dump({"vocab_size": 20, "d_model": 16, "n_layers": 1, "n_heads": 2, "n_kv_heads": 1, "head_dim": 8,
                   "ffn_hidden": 24, "max_seq_len": 16, "gate": {"position": "dense"}}, f)
    g5_ck = os.path.join(base, "g5_ckpt")
    run([binary, "init", "--config", g5, "--out", g5_ck])
    shared = os.path.join(base, "shared.json")
    with open(shared, "w") as f:
        json.dump({"vocab_size": 20, "d_model": 16, "n_layers": 1, "n_heads": 2, "n_kv_heads": 1, "head_dim": 8,
                   "ffn_hidden": 0, "max_seq_len": 16,
                   "moe": {"n_experts": 4, "top_k": 2, "expert_hidden": 8, "n_shared": 1}}, f)
    shared_ck = os.path.join(base, "shared_ckpt")
    run([binary, "init", "--config", shared, "--out", shared_ck])
    expect_refusal(binary, "export of a shared expert", ["export", shared_ck, "--format", "qwen3", "--out", out],
                   "moe.n_shared", out, failures)
    expect_refusal(binary, "export --format paper of a G5 gate", ["export", g5_ck, "--format", "paper", "--out", out],
                   "gate.position", out, failures)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gatedlm", required=True)
    ap.add_argument("--workdir")
    ap.add_argument("--only", help="comma-separated case names")
    args = ap.parse_args(argv)
    binary = os.path.abspath(args.gatedlm)
    work, tmp = work_directory(args.workdir, "gatedlm_hf_")
    torch.set_num_threads(1)
    failures = []
    try:
        names = args.only.split(",") if args.only else list(CASES)
        for name in names:
            shutil.rmtree(os.path.join(work, name), ignore_errors=True)
            check_case(binary, name, work, failures)
        if not args.only:
            shutil.rmtree(os.path.join(work, "refuse"), ignore_errors=True)
            check_refusals(binary, work, failures)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(failures)} failure(s)" + (": " + ", ".join(failures) if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
