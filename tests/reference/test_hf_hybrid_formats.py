#!/usr/bin/python3
"""gatedlm import / export of the hybrid Hugging Face formats (transformers' qwen3_next,
qwen3_5, qwen3_5_moe) against an independent PyTorch reading of the Hugging Face tensors
(hf_hybrid_model.py: transformers' description, fused layouts read by their own names).

For each case, random weights in a Hugging Face directory (Qwen3.5 dense as the released
multimodal wrapper with a vision tower and MTP tensors, and as the text-only model; Qwen3.5-MoE
with stacked experts; Qwen3-Next dense and MoE with fused in_proj_qkvz / in_proj_ba;
F32, BF16, F16; single file and sharded):
  1. gatedlm import -> the engine's logits (gatedlm debug grads) match the reference's on
     the same stored weights (relative L2 <= 1e-4, reference in float64); the skipped
     vision / MTP tensors are reported on stderr;
  2. gatedlm export --format <same> --dtype f32 -> the reference reads the exported files
     and matches the engine's logits (<= 1e-4);
  3. gatedlm import of that export gives back the checkpoint bit for bit (every tensor, and
     config.json);
and the refusals, each naming the key or tensor at fault with nothing written.

Usage: /usr/bin/python3 tests/reference/test_hf_hybrid_formats.py --gatedlm build/gatedlm [--workdir DIR]
"""
import argparse
import copy
import json
import os
import shutil
import sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402

import hf_hybrid_model as hh  # noqa: E402
import hf_layout_model as hf  # noqa: E402
from engine_harness import work_directory  # noqa: E402
from test_hf_formats import checkpoint_tensors, engine_logits, expect_refusal, rel, run  # noqa: E402

TOL = 1e-4
B, T = 2, 11

# A small Qwen3.5 text model: 4 layers, 3 linear : 1 full, n_v = 2 n_k, d_k != d_v.
TEXT = {"model_type": "qwen3_5_text", "vocab_size": 61, "hidden_size": 32, "intermediate_size": 40,
        "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
        "hidden_act": "silu", "max_position_embeddings": 64, "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
        "attention_bias": False, "attention_dropout": 0.0, "attn_output_gate": True, "initializer_range": 0.02,
        "full_attention_interval": 4,
        "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"],
        "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 8,
        "linear_value_head_dim": 6, "linear_conv_kernel_dim": 4, "mtp_num_hidden_layers": 1,
        "mtp_use_dedicated_embeddings": False, "mamba_ssm_dtype": "float32", "use_cache": True,
        "eos_token_id": 2, "dtype": "bfloat16",
        "rope_parameters": {"rope_type": "default", "rope_theta": 1000.0, "partial_rotary_factor": 0.25,
                            "mrope_section": [1, 0, 0], "mrope_interleaved": True}}
MOE_KEYS = {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 12,
            "shared_expert_intermediate_size": 10, "router_aux_loss_coef": 0.001, "output_router_logits": False}


def wrapper(model_type, text, tie=False):
    """The released multimodal layout: the language model's keys in text_config."""
    return {"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": model_type, "text_config": text,
            "vision_config": {"depth": 1, "hidden_size": 16, "model_type": "qwen3_5_vision"},
            "image_token_id": 50, "video_token_id": 51, "vision_start_token_id": 52, "vision_end_token_id": 53,
            "tie_word_embeddings": tie, "transformers_version": "5.3.0"}


def text(**over):
    c = copy.deepcopy(TEXT)
    c.update(over)
    return {k: v for k, v in c.items() if v is not None}


def qwen3_next(**over):
    c = text(model_type="qwen3_next", mtp_num_hidden_layers=None, mtp_use_dedicated_embeddings=None,
             use_sliding_window=False, sliding_window=None, max_window_layers=4,
             architectures=["Qwen3NextForCausalLM"], decoder_sparse_step=1, norm_topk_prob=True, mlp_only_layers=[],
             **MOE_KEYS)
    c.update(over)
    return {k: v for k, v in c.items() if v is not None}


# name -> (format, config, stored dtype, shards, skipped extras[, experts stacked])
CASES = {
    "qwen3_5_multimodal_bf16": ("qwen3_5", wrapper("qwen3_5", text(model_type="qwen3_5_text")), "BF16", 2, True),
    "qwen3_5_text_tied_bias_f32": ("qwen3_5", text(tie_word_embeddings=True, attention_bias=True,
                                                   layer_types=["full_attention", "linear_attention",
                                                                "full_attention", "linear_attention"],
                                                   full_attention_interval=None), "F32", 1, False),
    "qwen3_5_moe_multimodal_f16": ("qwen3_5_moe", wrapper("qwen3_5_moe", text(model_type="qwen3_5_moe_text",
                                                                              intermediate_size=None, **MOE_KEYS)),
                                   "F16", 1, True),
    "qwen3_5_moe_text_norm_topk": ("qwen3_5_moe", text(model_type="qwen3_5_moe_text", norm_topk_prob=True,
                                                       num_hidden_layers=2, full_attention_interval=2,
                                                       layer_types=None, **MOE_KEYS), "F32", 1, False),
    "qwen3_next_moe_step2_f32": ("qwen3_next", qwen3_next(decoder_sparse_step=2, norm_topk_prob=False), "F32", 1,
                                 False),
    "qwen3_next_moe_bf16_sharded": ("qwen3_next", qwen3_next(linear_num_key_heads=1, linear_num_value_heads=3),
                                    "BF16", 3, True),
    "qwen3_5_moe_experts_per_tensor": ("qwen3_5_moe", text(model_type="qwen3_5_moe_text", **MOE_KEYS), "F32", 1,
                                       False, False),
    "qwen3_next_stacked_experts": ("qwen3_next", qwen3_next(), "BF16", 1, False, True),
    "qwen3_next_dense": ("qwen3_next", qwen3_next(num_experts=0, rope_parameters=None, rope_theta=500.0,
                                                  partial_rotary_factor=0.5), "F32", 1, False),
}


def check_case(binary, name, work, failures):
    fmt, cfg, dtype, shards, extras, *stacked = CASES[name]
    src, ck, exp, back = (os.path.join(work, name, x) for x in ("hf", "ckpt", "export", "reimport"))
    tensors = hh.random_tensors(cfg, seed=sum(map(ord, name)), extras=extras, stacked=(stacked or [None])[0])
    hf.write_hf_dir(src, cfg, tensors, dtype, shards)
    stored = hf.read_hf_dir(src)[1]  # the weights as rounded to the stored dtype
    tokens = np.random.default_rng(len(name)).integers(0, hh.HybridLayout(cfg).V, size=(B, T))
    ref = hh.logits(cfg, stored, tokens).numpy()

    p = run([binary, "import", src, "--out", ck])
    reported = not extras or ("vision-tower tensors" in p.stderr and "multi-token-prediction" in p.stderr)
    got = engine_logits(binary, ck, tokens, os.path.join(work, name))
    e_import = rel(got, ref)

    run([binary, "export", ck, "--format", fmt, "--out", exp, "--dtype", "f32"])
    ecfg, etensors = hf.read_hf_dir(exp)
    e_export = rel(got, hh.logits(ecfg, etensors, tokens).numpy())

    run([binary, "import", exp, "--out", back, "--format", fmt])
    a, b = checkpoint_tensors(ck), checkpoint_tensors(back)
    identical = a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    with open(os.path.join(ck, "config.json")) as f1, open(os.path.join(back, "config.json")) as f2:
        same_config = json.load(f1) == json.load(f2)
    ok = e_import <= TOL and e_export <= TOL and identical and same_config and reported
    print(f"{name:30s} {fmt:11s} {dtype:4s} shards {shards}  import {e_import:.2e}  export {e_export:.2e}  "
          f"round trip {'bit-identical' if identical and same_config else 'DIFFERS'}"
          f"{'' if reported else '  (skipped tensors not reported)'}  {'PASS' if ok else 'FAIL'}")
    if not ok:
        failures.append(name)


def import_refusals(base, failures, binary):
    cfg = wrapper("qwen3_5", text(model_type="qwen3_5_text"))
    good = hh.random_tensors(cfg, seed=7)
    out = os.path.join(base, "out")

    def variant(tag, outer=None, inner=None, drop=None, add=None):
        c = copy.deepcopy(cfg)
        c.update(outer or {})
        c["text_config"].update(inner or {})
        t = dict(good)
        if drop:
            t.pop(drop)
        if add:
            t[add] = np.zeros(3)
        d = os.path.join(base, tag)
        hf.write_hf_dir(d, c, t)
        return d

    P = "model.language_model.layers."
    cases = [
        ("an unknown text_config key", variant("key", inner={"rope_magic": 3}), "rope_magic"),
        ("an unknown wrapper key", variant("okey", outer={"quantization_config": {}}), "quantization_config"),
        ("an ungated softmax layer", variant("gate", inner={"attn_output_gate": False}), "attn_output_gate"),
        ("a non-default rope type", variant("rope", inner={"rope_parameters": {"rope_type": "dynamic"}}),
         "rope_parameters.rope_type"),
        ("a partial rotary factor of no whole dims", variant("prf", inner={"rope_parameters":
                                                                           {"partial_rotary_factor": 0.3}}),
         "partial_rotary_factor"),
        ("layer_types against the interval", variant("kinds", inner={"full_attention_interval": 2}),
         "disagrees with full_attention_interval"),
        ("a non-silu activation", variant("act", inner={"hidden_act": "gelu"}), "hidden_act"),
        ("sliding-window attention", variant("swa", inner={"use_sliding_window": True}), "use_sliding_window"),
        ("MoE keys in a dense Qwen3.5", variant("moekey", inner={"num_experts": 4}), "num_experts"),
        ("a missing fused tensor", variant("missing", drop=P + "3.self_attn.q_proj.weight"),
         P + "3.self_attn.q_proj.weight"),
        ("an unexpected tensor", variant("extra", add=P + "0.self_attn.q_proj.weight"), P + "0.self_attn.q_proj.weight"),
        ("tied flags that disagree", variant("tie", outer={"tie_word_embeddings": True}), "tie_word_embeddings"),
    ]
    for label, src, needle in cases:
        expect_refusal(binary, label, ["import", src, "--out", out], needle, out, failures)
    nxt = qwen3_next(decoder_sparse_step=2)
    nxt_good = hh.random_tensors(nxt, seed=8)
    moe35 = text(model_type="qwen3_5_moe_text", **MOE_KEYS)
    moe35_good = hh.random_tensors(moe35, seed=9)
    for label, base_cfg, tensors, over, needle in [
            ("Qwen3-Next dense layers the step makes sparse", nxt, nxt_good, {"mlp_only_layers": [1]}, "mlp_only_layers"),
            ("a Qwen3.5-MoE sparse step", moe35, moe35_good, {"decoder_sparse_step": 2}, "decoder_sparse_step"),
            ("a Qwen3.5-MoE unnormalised router", moe35, moe35_good, {"norm_topk_prob": False}, "norm_topk_prob"),
            ("Qwen3.5-MoE experts the stack lacks", moe35, moe35_good, {"num_experts": 5}, "gate_up_proj")]:
        d = os.path.join(base, "moe_" + str(len(label)) + label.split()[-1])
        hf.write_hf_dir(d, {**base_cfg, **over}, tensors)
        expect_refusal(binary, label, ["import", d, "--out", out], needle, out, failures)
    expect_refusal(binary, "a Qwen3.5 config under --format qwen3_next",
                   ["import", variant("fmt"), "--out", out, "--format", "qwen3_next"], "model_type", out, failures)


def export_refusals(base, failures, binary):
    out = os.path.join(base, "out")
    configs = {  # gatedlm configs the hybrid formats cannot express
        "plain_norms": ({"norm_zero_centered": False, "gate": {"position": "sdpa"}}, "qwen3_5", "norm_zero_centered"),
        "headwise": ({"norm_zero_centered": True, "gate": {"position": "sdpa", "granularity": "headwise"}}, "qwen3_5",
                     "gate.granularity"),
        "ungated": ({"norm_zero_centered": True}, "qwen3_next", "\"gate\""),
        "g2": ({"norm_zero_centered": True, "gate": {"position": "value"}}, "qwen3_5", "gate.position"),
        "moe_as_dense": ({"norm_zero_centered": True, "gate": {"position": "sdpa"},
                          "moe": {"n_experts": 4, "top_k": 2, "expert_hidden": 8, "n_shared": 1}}, "qwen3_5", "moe"),
        "dense_as_moe": ({"norm_zero_centered": True, "gate": {"position": "sdpa"}}, "qwen3_5_moe", "moe"),
    }
    for tag, (over, fmt, needle) in configs.items():
        path = os.path.join(base, tag + ".json")
        with open(path, "w") as f:
            json.dump({"vocab_size": 20, "d_model": 16, "n_layers": 2, "n_heads": 2, "n_kv_heads": 1, "head_dim": 8,
                       "ffn_hidden": 24, "max_seq_len": 16, "full_attention_interval": 2,
                       "linear_attention": {"n_k_heads": 1, "n_v_heads": 2, "k_head_dim": 4, "v_head_dim": 4},
                       **over}, f)
        ck = os.path.join(base, tag + "_ckpt")
        run([binary, "init", "--config", path, "--out", ck])
        expect_refusal(binary, f"export --format {fmt} of {tag}", ["export", ck, "--format", fmt, "--out", out],
                       needle, out, failures)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gatedlm", required=True)
    ap.add_argument("--workdir")
    ap.add_argument("--only", help="comma-separated case names")
    args = ap.parse_args(argv)
    binary = os.path.abspath(args.gatedlm)
    work, tmp = work_directory(args.workdir, "gatedlm_hf_hybrid_")
    torch.set_num_threads(1)
    failures = []
    try:
        for name in args.only.split(",") if args.only else list(CASES):
            shutil.rmtree(os.path.join(work, name), ignore_errors=True)
            check_case(binary, name, work, failures)
        if not args.only:
            base = os.path.join(work, "refuse")
            shutil.rmtree(base, ignore_errors=True)
            import_refusals(base, failures, binary)
            export_refusals(base, failures, binary)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(failures)} failure(s)" + (": " + ", ".join(failures) if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
