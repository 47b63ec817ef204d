#!/usr/bin/python3
"""Whole-model check of the C++ engine against the PyTorch reference.

For each named configuration: random float32 weights (fixed seed) are written as a
checkpoint directory, random token ids as tokens.txt, then

    gatedlm debug grads --checkpoint DIR --token-ids DIR/tokens.txt --out DIR/engine.safetensors
                        --adamw-steps 3 --lr 0.001 --beta1 0.9 --beta2 0.95 --eps 1e-8
                        --weight-decay 0.1

and its logits, loss, gradients and AdamW losses are compared with the reference
computed in float64 from the same float32 weights.

Usage:
    /usr/bin/python3 tests/reference/test_against_engine.py --gatedlm build/gatedlm
        [--workdir DIR] [--only NAME[,NAME...]]
    ... --emit-only DIR     write checkpoints, tokens and reference outputs; run nothing
    ... --self-test         check the reference itself (no engine needed)
    ... --list              print the configuration names
"""

import argparse
import copy
import json
import os
import shutil
import subprocess
import sys
import time
import zlib

sys.dont_write_bytecode = True  # keep the source tree clean
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402

import hybrid_reference  # noqa: E402
import safetensors_io  # noqa: E402
import switch_heads_reference  # noqa: E402
from engine_harness import engine_binary, work_directory  # noqa: E402
from moe_reference import min_routing_margin, moe_layers  # noqa: E402
from reference_model import GatedLM, ModelConfig  # noqa: E402

# ---- test parameters --------------------------------------------------------------------

BATCH, SEQ = 2, 12
TOL = 1e-4
# AdamW settings as passed on the command line (strings) and as numbers for the reference.
ADAMW_ARGS = {"steps": "3", "lr": "0.001", "beta1": "0.9", "beta2": "0.95", "eps": "1e-8",
              "weight_decay": "0.1"}
ADAMW = {k: (int(v) if k == "steps" else float(v)) for k, v in ADAMW_ARGS.items()}
MATRIX_STD = 0.2          # so attention is far from uniform
NORM_JITTER = 0.1         # norm weights 1 + 0.1 * randn
CONST_GATE_STD = 1.0      # input-independent gate values
SINK_STD = 1.5            # learned sink logits: from a small share of a row to most of it
CLIP_MARGIN = 1e-5        # no pre-clip value this close to +-clip (gradients well defined)
CLIP_FRACTION = (0.05, 0.95)
ENGINE_TIMEOUT_S = 300
MOE_MARGIN = 1e-4         # no router top-k decision this close to a tie (unless an exact one)
# Hybrid cases: a seed whose float32 reference is within TOL / 4 of the float64 one. The
# gated RMSNorm of a near-zero delta-rule output, the L2 norm of a near-zero q or k, and
# A_log / dt_bias gradients that are sums of cancelling terms amplify float32 rounding: over
# random seeds an exact float32 evaluation scores up to about 1e-4 on some gradient.
HYBRID_F32_MARGIN = TOL / 4

BASE = dict(vocab_size=61, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=8,
            ffn_hidden=48, max_seq_len=32, init_std=MATRIX_STD)


def _gate(**kw):
    return {"gate": kw}


def _moe(**kw):
    """An MoE FFN with auxiliary-loss weights large enough to show in the gradients."""
    return {"moe": {"lb_coef": 0.1, "z_coef": 0.01, **kw}}


# name -> overrides of BASE. Keys left out of the written config.json use their defaults,
# which exercises the engine's defaults; "explicit_defaults" writes every key.
CASES = {
    "baseline": {},
    "explicit_defaults": {"__explicit__": True},
    "mha": dict(n_kv_heads=4, rope_base=500.0),
    "mqa": dict(n_kv_heads=1, rope_base=100.0),
    "no_qknorm": dict(qk_norm=False, rope_base=1000.0),
    "tied": dict(tie_embeddings=True),
    "partial_rope": dict(rope_dims=4, rope_base=100.0),
    "sdpa_elem_sigmoid": _gate(position="sdpa"),
    "sdpa_headwise": dict(rope_base=1e6, **_gate(position="sdpa", granularity="headwise")),
    "sdpa_head_shared": _gate(position="sdpa", head_shared=True),
    "value_elem": _gate(position="value"),
    "value_headwise": _gate(position="value", granularity="headwise"),
    "value_head_shared": _gate(position="value", head_shared=True),
    "key_elem": dict(rope_base=300.0, **_gate(position="key")),
    "key_head_shared": _gate(position="key", head_shared=True),
    "query_elem": _gate(position="query"),
    "query_head_shared": dict(qk_norm=False, **_gate(position="query", head_shared=True)),
    "dense_elem": _gate(position="dense"),
    "sdpa_additive_silu": _gate(position="sdpa", combine="add", activation="silu"),
    "sdpa_elem_silu": _gate(position="sdpa", activation="silu"),
    "sdpa_ns_sigmoid": _gate(position="sdpa", activation="ns_sigmoid"),
    "sdpa_constant": _gate(position="sdpa", input="constant", init="zero"),
    "sdpa_constant_headwise": _gate(position="sdpa", input="constant", granularity="headwise"),
    "sdpa_input_dims": _gate(position="sdpa", input_dims=16),
    "sdpa_rmsnorm": dict(sdpa_transform="rmsnorm", norm_eps=1e-5),
    "sdpa_silu_transform": dict(sdpa_transform="silu"),
    "additive_identity": _gate(position="sdpa", combine="add", activation="identity"),
    "sandwich": dict(sandwich_norm=True),
    "clip": dict(residual_clip=0.5),
    "rope_linear": dict(rope_dims=6, rope_scaling={"type": "linear", "factor": 2.5}),
    "rope_ntk": dict(rope_base=1000.0, rope_scaling={"type": "ntk", "factor": 4.0}),
    "rope_yarn": dict(rope_base=100.0, rope_scaling={"type": "yarn", "factor": 3.0,
                                                     "original_max_seq_len": 256},
                      **_gate(position="sdpa")),
    "combo": dict(n_kv_heads=1, tie_embeddings=True, rope_dims=6, rope_base=50.0, qk_norm=False,
                  sdpa_transform="rmsnorm", sandwich_norm=True, residual_clip=1.5,
                  **_gate(position="value", granularity="headwise", activation="ns_sigmoid",
                          input_dims=20)),
    "qkv_o_bias": dict(attn_qkv_bias=True, attn_o_bias=True),
    # Learned sink logits (kernels/attention_sinks.h): alone, with the G1 gate in the kernel's
    # epilogue, and with a headwise gate and GQA after it.
    "sinks": dict(attention_sinks=True),
    "sinks_g1": dict(attention_sinks=True, **_gate(position="sdpa")),
    "sinks_headwise_mqa": dict(attention_sinks=True, n_kv_heads=1, **_gate(position="sdpa", granularity="headwise")),
    # Sliding-window layers (model/mixer_sliding.h) beside full ones: windows inside the
    # 12-token sequences, with the gate and with sinks.
    "sliding_3to1_g1": dict(n_layers=4, layer_types=["sliding_attention"] * 3 + ["full_attention"], sliding_window=5,
                            **_gate(position="sdpa")),
    "sliding_sinks_w1": dict(layer_types=["sliding_attention", "full_attention"], sliding_window=1,
                             attention_sinks=True),
    # Softpick (arXiv 2504.20966) instead of softmax: alone with GQA, with the G1 gate and MoE,
    # and in sliding layers.
    "softpick": dict(attention_normalizer="softpick"),
    "softpick_g1_moe": dict(attention_normalizer="softpick", **_moe(n_experts=4, top_k=2, expert_hidden=8),
                            **_gate(position="sdpa")),
    "softpick_sliding": dict(attention_normalizer="softpick", layer_types=["sliding_attention", "full_attention"],
                             sliding_window=4),
    "sinks_moe_g1": dict(attention_sinks=True, **_moe(n_experts=4, top_k=2, expert_hidden=12), **_gate(position="sdpa")),
    "qkv_bias_sdpa_headwise": dict(attn_qkv_bias=True, **_gate(position="sdpa", granularity="headwise")),
    "qkv_o_bias_sdpa_elem_mqa": dict(attn_qkv_bias=True, attn_o_bias=True, n_kv_heads=1,
                                     **_gate(position="sdpa")),
    # Mixture of experts (src/model/moe.h): several E, k, shared experts, every k-th layer,
    # exact ties and an expert that no token reaches ("__moe_weights__" edits the router).
    "moe_e4_k1": _moe(n_experts=4, top_k=1, expert_hidden=16, norm_topk_prob=False),
    "moe_e8_k2_norm": _moe(n_experts=8, top_k=2, expert_hidden=12),
    "moe_e6_k3_shared_every2": dict(**_moe(n_experts=6, top_k=3, expert_hidden=8, n_shared=2,
                                           shared_hidden=8, every=2, norm_topk_prob=False),
                                    **_gate(position="sdpa")),
    "moe_e4_k4_shared": _moe(n_experts=4, top_k=4, expert_hidden=8, n_shared=1, shared_hidden=20),
    "moe_ties": dict(__moe_weights__="ties", **_moe(n_experts=5, top_k=2, expert_hidden=8)),
    "moe_empty_expert": dict(__moe_weights__="empty",
                             **_moe(n_experts=6, top_k=2, expert_hidden=8, norm_topk_prob=False)),
}
CASES.update(switch_heads_reference.ENGINE_CASES)
CASES.update(hybrid_reference.ENGINE_CASES)


def case_config_json(name):
    """The dict written as config.json for a case."""
    over = copy.deepcopy(CASES[name])
    explicit = over.pop("__explicit__", False)
    over.pop("__moe_weights__", None)
    over.pop("__seq__", None)
    d = {**BASE, **over}
    if explicit:
        d = ModelConfig.from_json(d).to_json()
    return d


def _seed(name, attempt):
    return 1000 + zlib.crc32(name.encode()) % 100000 + 7919 * attempt


def random_weights(model, gen):
    """Randomise every parameter (matrices and biases N(0, 0.2), norms 1 + 0.1 N, gates random)."""
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n.endswith(".bias"):
                p.copy_(torch.randn(p.shape, generator=gen) * MATRIX_STD)
            elif ".self_attn.gate." in n and p.ndim == 1:
                p.copy_(torch.randn(p.shape, generator=gen) * CONST_GATE_STD)
            elif n.endswith(".self_attn.sinks"):
                p.copy_(torch.randn(p.shape, generator=gen) * SINK_STD)
            elif p.ndim >= 2:
                p.copy_(torch.randn(p.shape, generator=gen) * MATRIX_STD)
            else:
                p.copy_(1.0 + NORM_JITTER * torch.randn(p.shape, generator=gen))


def edit_router(model, how):
    """ties: in every MoE layer router rows 3 = 2 and 4 = 0 (exact ties, the lower index
    wins); empty: rows 1 = -0, 3 = -2 and the last 0, so with top_k <= 2 the last expert
    never wins (|a| and |b| beat 0) and receives no token."""
    with torch.no_grad():
        for mod in moe_layers(model):
            r = mod.gate.weight
            if how == "ties":
                r[3] = r[2]
                r[4] = r[0]
            elif how == "empty":
                r[1] = -r[0]
                r[3] = -r[2]
                r[-1] = 0.0


def build_case(name, attempt=0):
    """(config dict, float32 model, tokens [B, T] int64) for a case."""
    cfg_json = case_config_json(name)
    cfg = ModelConfig.from_json(cfg_json)
    gen = torch.Generator().manual_seed(_seed(name, attempt))
    model = GatedLM(cfg).to(torch.float32)
    random_weights(model, gen)
    hybrid_reference.randomize_for_tests(model, gen)
    switch_heads_reference.adjust_case_weights(name, model)
    if "__moe_weights__" in CASES[name]:
        edit_router(model, CASES[name]["__moe_weights__"])
    seq = CASES[name].get("__seq__", SEQ)
    tokens = torch.randint(0, cfg.vocab_size, (BATCH, seq), generator=gen, dtype=torch.int64)
    return cfg_json, model, tokens


# ---- reference computation --------------------------------------------------------------

def _trace_stats(cfg, trace, stats):
    _clip_stats(cfg, trace, stats)
    switch_heads_reference.selection_stats(cfg, trace, stats)


def _clip_stats(cfg, trace, stats):
    c = cfg.residual_clip
    if c <= 0:
        return
    for k, v in trace.items():
        if k.endswith("_preclip"):
            a = v.abs()
            stats["min_margin"] = min(stats["min_margin"], float((a - c).abs().min()))
            stats["clipped"] += int((a > c).sum())
            stats["total"] += a.numel()


def adamw_param_groups(model, weight_decay):
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    return [{"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0}]


def reference_outputs(model32, tokens, dtype=torch.float64, adamw=ADAMW):
    """Reference logits, loss, grads and AdamW losses, computed in `dtype`.

    Returns (outputs dict with engine-file keys, clip statistics).
    """
    cfg = model32.cfg
    stats = {"min_margin": float("inf"), "clipped": 0, "total": 0, "moe_margin": float("inf"),
             "moe_counts": None}

    model = copy.deepcopy(model32).to(dtype)
    trace = {}
    logits = model(tokens, trace=trace)
    _trace_stats(cfg, trace, stats)
    stats["moe_margin"] = min_routing_margin(model)
    if moe_layers(model):
        stats["moe_counts"] = [mod.last["counts"].tolist() for mod in moe_layers(model)]
    loss = model.loss_from_logits(logits, tokens)
    model.zero_grad(set_to_none=True)
    loss.backward()
    out = {"logits": logits.detach(), "loss": loss.detach().reshape(1)}
    if moe_layers(model):
        from moe_reference import aux_losses
        lb, z = aux_losses(model)
        out["aux_lb"] = lb.detach().reshape(1)
        out["aux_z"] = z.detach().reshape(1)
    for n, p in model.named_parameters():  # an expert no token reached has no gradient: zeros
        out["grad." + n] = p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p)

    opt_model = copy.deepcopy(model32).to(dtype)
    opt = torch.optim.AdamW(adamw_param_groups(opt_model, adamw["weight_decay"]), lr=adamw["lr"],
                            betas=(adamw["beta1"], adamw["beta2"]), eps=adamw["eps"])
    losses = []
    for step in range(adamw["steps"] + 1):
        opt.zero_grad(set_to_none=True)
        trace = {}
        l_ = opt_model.loss_from_logits(opt_model(tokens, trace=trace), tokens)
        _trace_stats(cfg, trace, stats)
        stats["moe_margin"] = min(stats["moe_margin"], min_routing_margin(opt_model))
        losses.append(l_.detach())
        if step < adamw["steps"]:
            l_.backward()
            opt.step()
    out["adamw_losses"] = torch.stack(losses)
    return out, stats


def prepare_case(name):
    """Build a case whose reference is well conditioned; returns (cfg_json, model, tokens, ref)."""
    for attempt in range(20):
        cfg_json, model, tokens = build_case(name, attempt)
        ref, stats = reference_outputs(model, tokens)
        if model.cfg.residual_clip > 0:
            frac = stats["clipped"] / max(stats["total"], 1)
            if stats["min_margin"] < CLIP_MARGIN or not (CLIP_FRACTION[0] <= frac <= CLIP_FRACTION[1]):
                continue
        if not switch_heads_reference.selection_well_separated(stats):
            continue
        if stats["moe_margin"] < MOE_MARGIN:
            continue
        if hybrid_reference.is_hybrid(model.cfg) and not float32_well_conditioned(model, tokens, ref):
            continue
        how = CASES[name].get("__moe_weights__")
        counts = stats["moe_counts"]
        if how == "empty" and not all(c[-1] == 0 for c in counts):
            raise RuntimeError(f"{name}: the last expert received tokens {counts}")
        if how == "ties" and not any(c[2] > c[3] for c in counts):
            continue  # want a tie decided by the index: expert 2 chosen where 3 ties with it
        return cfg_json, model, tokens, ref, stats
    raise RuntimeError(f"{name}: could not find a seed with values away from the clip or top-k boundary, "
                       "router decisions away from ties and (hybrids) a float32 evaluation within "
                       f"{HYBRID_F32_MARGIN:g}")


def float32_well_conditioned(model32, tokens, ref):
    """The float32 reference scores within HYBRID_F32_MARGIN on every compared quantity."""
    r32, _ = reference_outputs(model32, tokens, dtype=torch.float32)
    s, _, _ = compare(r32, ref)
    return all(v <= HYBRID_F32_MARGIN for v in s.values())


def write_case(directory, cfg_json, model, tokens, ref):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(cfg_json, f, indent=2)
        f.write("\n")
    safetensors_io.save(os.path.join(directory, "model.safetensors"), model.state_dict_flat(),
                        metadata={"format": "pt"})
    with open(os.path.join(directory, "tokens.txt"), "w") as f:
        for row in tokens.tolist():
            f.write(" ".join(str(t) for t in row) + "\n")
    # The reference outputs (float32) with the engine file's names, for debugging.
    safetensors_io.save(os.path.join(directory, "reference.safetensors"), ref)


# ---- comparison -------------------------------------------------------------------------

def rel_err(engine, ref):
    e = engine.to(torch.float64).reshape(-1)
    r = ref.to(torch.float64).reshape(-1)
    if not torch.isfinite(e).all():
        return float("inf")
    return float((e - r).norm() / max(float(r.norm()), 1e-12))


def compare(engine, ref):
    """Returns (errors dict, list of problems)."""
    problems = []
    errs = {}
    grad_keys = [k for k in ref if k.startswith("grad.")]
    for k in ref:
        if k not in engine:
            problems.append(f"missing {k}")
            continue
        if tuple(engine[k].shape) != tuple(ref[k].shape):
            problems.append(f"{k}: shape {tuple(engine[k].shape)} != {tuple(ref[k].shape)}")
            continue
        errs[k] = rel_err(engine[k], ref[k])
    for k in engine:
        if k.startswith("grad.") and k not in ref:
            problems.append(f"unexpected {k} (no such parameter)")
    # adamw_losses: each loss checked on its own
    if "adamw_losses" in errs:
        e = engine["adamw_losses"].to(torch.float64)
        r = ref["adamw_losses"]
        errs["adamw_losses"] = max(float((e[i] - r[i]).abs() / max(float(r[i].abs()), 1e-12))
                                   if torch.isfinite(e[i]) else float("inf") for i in range(len(r)))
    summary = {
        "logits": errs.get("logits", float("nan")),
        "loss": errs.get("loss", float("nan")),
        "grads": max((errs[k] for k in grad_keys if k in errs), default=float("nan")),
        "adamw": errs.get("adamw_losses", float("nan")),
    }
    worst = max((k for k in grad_keys if k in errs), key=lambda k: errs[k], default=None)
    for k, v in errs.items():
        if not v <= TOL:
            problems.append(f"{k}: rel err {v:.3e} > {TOL:g}")
    return summary, worst, problems


def run_engine(binary, case_dir):
    out = os.path.join(case_dir, "engine.safetensors")
    if os.path.exists(out):
        os.remove(out)
    cmd = [binary, "debug", "grads", "--checkpoint", case_dir,
           "--token-ids", os.path.join(case_dir, "tokens.txt"), "--out", out,
           "--adamw-steps", ADAMW_ARGS["steps"], "--lr", ADAMW_ARGS["lr"],
           "--beta1", ADAMW_ARGS["beta1"], "--beta2", ADAMW_ARGS["beta2"],
           "--eps", ADAMW_ARGS["eps"], "--weight-decay", ADAMW_ARGS["weight_decay"]]
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=ENGINE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {ENGINE_TIMEOUT_S} s: {' '.join(cmd)}"
    except OSError as e:
        return None, f"could not run {binary}: {e}"
    if p.returncode != 0:
        err = p.stderr.decode(errors="replace")[-4000:]
        return None, f"exit code {p.returncode}: {' '.join(cmd)}\n{err}"
    try:
        return safetensors_io.load(out), None
    except (OSError, ValueError) as e:
        return None, f"cannot read {out}: {e}"


# ---- main -------------------------------------------------------------------------------

def select_cases(only):
    if not only:
        return list(CASES)
    names = [n for part in only for n in part.split(",") if n]
    unknown = [n for n in names if n not in CASES]
    if unknown:
        raise SystemExit(f"unknown configuration(s) {unknown}; known: {', '.join(CASES)}")
    return names


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gatedlm", help="path to the gatedlm binary")
    ap.add_argument("--workdir", help="keep checkpoints and outputs here (default: a temp dir)")
    ap.add_argument("--only", action="append", help="run only these configurations (comma list)")
    ap.add_argument("--emit-only", metavar="DIR", help="write the cases to DIR, run no engine")
    ap.add_argument("--self-test", action="store_true", help="check the reference itself")
    ap.add_argument("--list", action="store_true", help="list the configuration names")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)

    if args.list:
        print("\n".join(CASES))
        return 0
    if args.self_test:
        import self_test
        return self_test.main(select_cases(args.only))
    if not args.emit_only and not args.gatedlm:
        ap.error("--gatedlm is required (or --emit-only / --self-test)")
    names = select_cases(args.only)

    if args.emit_only:
        for name in names:
            cfg_json, model, tokens, ref, stats = prepare_case(name)
            write_case(os.path.join(args.emit_only, name), cfg_json, model, tokens, ref)
            print(f"{name}: wrote {os.path.join(args.emit_only, name)}")
        return 0

    binary = engine_binary(args.gatedlm, len(names))
    if binary is None:
        return 1
    work, tmp = work_directory(args.workdir, "gatedlm_ref_")
    t0 = time.time()
    passed = failed = skipped = 0
    try:
        for name in names:
            case_dir = os.path.join(work, name)
            try:
                cfg_json, model, tokens, ref, stats = prepare_case(name)
                write_case(case_dir, cfg_json, model, tokens, ref)
            except Exception as e:  # a reference bug must not hide the other cases
                print(f"{name:<24} FAIL (reference error: {type(e).__name__}: {e})")
                failed += 1
                continue
            engine, err = run_engine(binary, case_dir)
            missing_key = hybrid_reference.engine_lacks_hybrid(err) if engine is None else None
            if missing_key:
                print(f"{name:<24} SKIP (the engine does not know the hybrid config key "
                      f"\"{missing_key}\" yet)")
                skipped += 1
                continue
            if engine is None:
                print(f"{name:<24} FAIL (engine error)\n  " + err.replace("\n", "\n  ").rstrip())
                failed += 1
                continue
            s, worst, problems = compare(engine, ref)
            ok = not problems
            line = (f"{name:<24} logits {s['logits']:.2e}  loss {s['loss']:.2e}  "
                    f"grads {s['grads']:.2e}  adamw {s['adamw']:.2e}  {'PASS' if ok else 'FAIL'}")
            print(line)
            if not ok:
                if worst:
                    print(f"  worst gradient: {worst}")
                for pr in problems[:20]:
                    print("  " + pr)
                if len(problems) > 20:
                    print(f"  ... and {len(problems) - 20} more")
                failed += 1
            else:
                passed += 1
            sys.stdout.flush()
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"({time.time() - t0:.1f} s; tolerance {TOL:g} relative L2; reference in float64)")
    if skipped:
        print(f"({skipped} hybrid case(s) skipped: the engine rejects their config keys as unknown)")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
