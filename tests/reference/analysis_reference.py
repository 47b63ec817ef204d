#!/usr/bin/python3
"""Cross-check of `gatedlm analyze` against statistics computed with the PyTorch reference.

For each named configuration: `gatedlm init` writes a checkpoint with random weights
(init_std 0.2, so attention is far from uniform; one case plants a huge BOS embedding
channel to create massive activations), a small text file is generated, and

    gatedlm analyze --checkpoint DIR --text text.txt --tokenizer byte --sequences 4
                    --seq-len 24 (8 for the short_* cases) --map-layers 0,2 --seed 5
                    --out DIR/analysis.json

runs. The reference model (float64 from the float32 weights) then runs on exactly the
windows the engine wrote into `token_ids`, and recomputes every statistic from its trace
(attention probabilities, residuals, gate scores, SDPA outputs), following metrics.md:
F-Attn (per head, per layer, mean; rows t>=1 and all rows), sink rate, attention maps,
top-3 |h|, median, massive counts, M-Act, gate score mean and histogram, sparsity
before/after/control, mean |Y| and |Y'|, and the SDPA-output summary. The windows
themselves are re-derived from the seed (SplitMix64 as in src/core/rng.h).

Continuous quantities must agree to 1e-4 relative (||engine - ref|| / ||ref||); shares of
values below a threshold (sparsity, histogram bins) to 1e-3 absolute; the sink rate
exactly unless some alpha_0 lies within 1e-5 of eps.

Usage:
    /usr/bin/python3 tests/reference/analysis_reference.py --gatedlm build/gatedlm
        [--workdir DIR] [--only NAME[,NAME...]] [--list]
The last line is `N passed, M failed`; exit status 1 on any failure.
"""

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # keep the source tree clean
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402

import safetensors_io  # noqa: E402
from engine_harness import SplitMix64, derive  # noqa: E402
from reference_model import load_checkpoint, rms_norm  # noqa: E402

REL_TOL = 1e-4
SHARE_TOL = 1e-3
SINK_MARGIN = 1e-5
SEQUENCES, SEQ_LEN, SEED, MAP_LAYERS = 4, 24, 5, (0, 2)
BOS = 256  # the byte tokenizer's BOS id
ENGINE_TIMEOUT_S = 120

BASE = dict(vocab_size=258, d_model=32, n_layers=3, n_heads=4, n_kv_heads=2, head_dim=8,
            ffn_hidden=48, max_seq_len=64, init_std=0.2)

CASES = {
    "baseline": {},
    "sdpa_elementwise": dict(gate=dict(position="sdpa")),
    "sdpa_headwise": dict(gate=dict(position="sdpa", granularity="headwise")),
    "sdpa_head_shared": dict(gate=dict(position="sdpa", head_shared=True)),
    "sdpa_add_silu": dict(gate=dict(position="sdpa", combine="add", activation="silu")),
    "value_elementwise": dict(gate=dict(position="value")),
    "dense": dict(gate=dict(position="dense")),
    "sdpa_rmsnorm_transform": dict(sdpa_transform="rmsnorm", gate=dict(position="sdpa")),
    # BOS embedding channel 3 set to 3000: it rides the residual stream through every layer.
    "massive": {"__plant__": 3000.0},
    # Windows of 8: near-uniform heads have alpha_0 around H_8/8 = 0.34, so the sink rate is
    # a mix of heads above and below eps = 0.3.
    "short_baseline": {"__seq_len__": 8},
    "short_sdpa": {"__seq_len__": 8, "gate": dict(position="sdpa")},
}


# ---- the engine's window sampling (src/core/rng.h, src/analysis/sequences.cpp) ----------

def expected_windows(stream, count, length, seed):
    rng = SplitMix64(derive(seed, "analysis.sequences"))
    out = []
    for _ in range(count):
        o = rng.below(len(stream) - (length - 1) + 1)
        out.append([BOS] + list(stream[o:o + length - 1]))
    return out


# ---- statistics from the reference's trace ----------------------------------------------

def median_abs(x):
    """Median of |x| over all elements; mean of the two middle values for an even count."""
    v = x.abs().flatten().sort().values
    n = v.numel()
    return float(v[n // 2]) if n % 2 else 0.5 * float(v[n // 2 - 1] + v[n // 2])


def shares(x):
    a = x.abs()
    return {"lt_1e-2": float((a < 1e-2).double().mean()), "lt_1e-3": float((a < 1e-3).double().mean())}


def gate_target(model, trace, prefix, l, tokens):
    """(Y, expanded score) at the gate's position, or (None, score) when Y is not traced."""
    cfg = model.cfg
    a = trace[prefix + "gate_score"]
    if cfg.gate.position == "sdpa":
        y = trace[prefix + "sdpa_out"]
        return y, a.expand_as(y)
    if cfg.gate.position == "dense":
        return None, a
    heads = cfg.gate_heads()
    B, T = tokens.shape
    return None, a.expand(B, T, heads, cfg.head_dim)


def sdpa_output(model, trace, l, tokens):
    """SDPA output of layer l (before any G1 gate), recomputed where the trace lacks it."""
    key = f"layers.{l}.sdpa_out"
    if key in trace:
        return trace[key]
    cfg = model.cfg
    layer = model.model.layers[l]
    x = model.model.embed_tokens.weight[tokens] if l == 0 else trace[f"layers.{l - 1}.residual"]
    h = rms_norm(x, layer.input_layernorm.weight, cfg.norm_eps)
    B, T, _ = h.shape
    v = (h @ layer.self_attn.v_proj.weight.t()).reshape(B, T, cfg.n_kv_heads, cfg.head_dim)
    if cfg.gate.position == "value":
        v = layer.self_attn.apply_gate(v, trace[f"layers.{l}.gate_score"])
    v = v.repeat_interleave(cfg.n_heads // cfg.n_kv_heads, dim=2).transpose(1, 2)
    y = (trace[f"layers.{l}.attn_probs"] @ v).transpose(1, 2)
    assert cfg.sdpa_transform == "none"  # traced as sdpa_out otherwise (G1 cases)
    return y


def reference_stats(model, tokens, eps=0.3):
    cfg = model.cfg
    L = cfg.n_layers
    trace = {}
    with torch.no_grad():
        model(tokens, trace=trace)
    B, T = tokens.shape
    out = {"f_attn": [], "f_attn_all": [], "alpha": [], "maps": {}, "massive": [], "gates": [],
           "sdpa": []}
    for l in range(L):
        p = f"layers.{l}."
        A = trace[p + "attn_probs"]                     # [B, H, T, T]
        out["f_attn"].append(A[:, :, 1:, 0].mean(-1).mean(0).tolist())
        alpha = A[:, :, :, 0].mean(-1)                  # [B, H]
        out["f_attn_all"].append(alpha.mean(0).tolist())
        out["alpha"].append(alpha)
        n = min(T, 64)
        out["maps"][str(l)] = A.mean(dim=(0, 1))[:n, :n]

        h = trace[p + "residual"]                       # [B, T, d]
        tops, meds, counts, first = [], [], [], []
        for b in range(B):
            a = h[b].abs()
            flat = a.flatten()
            top = flat.topk(3)
            tops.append(top.values.tolist())
            med = median_abs(h[b])
            meds.append(med)
            counts.append(float(((flat > 100) & (flat >= 1000 * med)).sum()))
            first.append(1.0 if int(top.indices[0]) < cfg.d_model else 0.0)
        out["massive"].append({"top3": [sum(t[k] for t in tops) / B for k in range(3)],
                               "median": sum(meds) / B, "massive_count": sum(counts) / B,
                               "top1_first_token": sum(first) / B})

        s = sdpa_output(model, trace, l, tokens)
        out["sdpa"].append({"mean_abs": float(s.abs().mean()), "sparsity": shares(s)})

        if cfg.gate.position != "none":
            y, a = gate_target(model, trace, p, l, tokens)
            g = {"mean_score": float(a.mean())}
            inside = (a >= 0) & (a <= 1)
            idx = (a[inside] * 50).floor().clamp(max=49).long()
            g["histogram"] = (torch.bincount(idx, minlength=50).double() / a.numel()).tolist()
            g["below_range"] = float((a < 0).double().mean())
            g["above_range"] = float((a > 1).double().mean())
            if y is not None:
                mult = cfg.gate.combine == "multiply"
                y_gated = y * a if mult else y + a
                control = y * g["mean_score"] if mult else y + g["mean_score"]
                g["sparsity"] = {"before": shares(y), "after": shares(y_gated),
                                 "mean_scaled_control": shares(control)}
                g["mean_abs_y"] = float(y.abs().mean())
                g["mean_abs_y_gated"] = float(y_gated.abs().mean())
            out["gates"].append(g)
    alpha = torch.stack(out["alpha"])                   # [L, B, H]
    out["sink_rate"] = 100.0 * float((alpha > eps).double().mean(dim=(0, 2)).mean())
    out["sink_borderline"] = bool(((alpha - eps).abs() < SINK_MARGIN).any())
    out["m_act"] = sum(m["top3"][0] for m in out["massive"]) / L
    return out


# ---- comparison -------------------------------------------------------------------------

class Checker:
    def __init__(self):
        self.failures = []
        self.count = 0

    def rel(self, name, got, want, tol=REL_TOL):
        g = torch.as_tensor(got, dtype=torch.float64).flatten()
        w = torch.as_tensor(want, dtype=torch.float64).flatten()
        self.count += 1
        if g.shape != w.shape:
            self.failures.append(f"{name}: shape {tuple(g.shape)} != {tuple(w.shape)}")
            return
        err = float((g - w).norm() / max(float(w.norm()), 1e-12))
        if not err <= tol:
            self.failures.append(f"{name}: relative error {err:.3g} > {tol:g}")

    def abs(self, name, got, want, tol=SHARE_TOL):
        g = torch.as_tensor(got, dtype=torch.float64).flatten()
        w = torch.as_tensor(want, dtype=torch.float64).flatten()
        self.count += 1
        err = float((g - w).abs().max()) if g.shape == w.shape else math.inf
        if not err <= tol:
            self.failures.append(f"{name}: max abs difference {err:.3g} > {tol:g}")

    def equal(self, name, got, want):
        self.count += 1
        if got != want:
            self.failures.append(f"{name}: {got!r} != {want!r}")


def compare(eng, ref, cfg, stream, seq_len, chk):
    chk.equal("format", eng.get("format"), "gatedlm-analysis")
    chk.equal("token_ids", eng["token_ids"], expected_windows(stream, SEQUENCES, seq_len, SEED))
    chk.equal("sequences/seq_len/seed", (eng["sequences"], eng["seq_len"], eng["seed"]),
              (SEQUENCES, seq_len, SEED))
    chk.equal("f_attn.rows", eng["f_attn"]["rows"], "t>=1")
    for key, rkey in (("f_attn", "f_attn"), ("f_attn_all_rows", "f_attn_all")):
        per_head = torch.tensor(ref[rkey], dtype=torch.float64)
        chk.rel(f"{key}.per_head", eng[key]["per_head"], per_head)
        chk.rel(f"{key}.per_layer", eng[key]["per_layer"], per_head.mean(1))
        chk.rel(f"{key}.mean", eng[key]["mean"], per_head.mean())
    chk.equal("sink_rate.eps", eng["sink_rate"]["eps"], 0.3)
    if ref["sink_borderline"]:
        print("    (sink rate not compared: an alpha_0 lies within 1e-5 of eps)")
    else:
        chk.rel("sink_rate.percent", eng["sink_rate"]["percent"], ref["sink_rate"], tol=1e-12)
    chk.equal("attention_maps.layers", sorted(eng["attention_maps"]), sorted(str(l) for l in MAP_LAYERS))
    for l in MAP_LAYERS:
        chk.rel(f"attention_maps.{l}", eng["attention_maps"][str(l)], ref["maps"][str(l)])

    ma = eng["massive_activations"]
    chk.rel("m_act", ma["m_act"], ref["m_act"])
    for l, (e, r) in enumerate(zip(ma["per_layer"], ref["massive"])):
        chk.rel(f"massive[{l}].top3", e["top3"], r["top3"])
        chk.rel(f"massive[{l}].median", e["median"], r["median"])
        chk.equal(f"massive[{l}].massive_count", e["massive_count"], r["massive_count"])
        chk.equal(f"massive[{l}].top1_first_token", e["top1_first_token"], r["top1_first_token"])
    chk.equal("massive.layers", len(ma["per_layer"]), cfg["n_layers"])

    for l, (e, r) in enumerate(zip(eng["sdpa_output"]["per_layer"], ref["sdpa"])):
        chk.rel(f"sdpa_output[{l}].mean_abs", e["mean_abs"], r["mean_abs"])
        chk.abs(f"sdpa_output[{l}].sparsity", list(e["sparsity"].values()),
                [r["sparsity"][k] for k in e["sparsity"]])

    gated = cfg.get("gate", {}).get("position", "none") != "none"
    if not gated:
        chk.equal("gates", eng["gates"], None)
        chk.equal("gate_variant", eng["gate_variant"], "none")
        return
    chk.equal("gates.per_layer", len(eng["gates"]["per_layer"]), cfg["n_layers"])
    means = [g["mean_score"] for g in ref["gates"]]
    chk.rel("gates.mean_score", eng["gates"]["mean_score"], sum(means) / len(means))
    for l, (e, r) in enumerate(zip(eng["gates"]["per_layer"], ref["gates"])):
        chk.rel(f"gates[{l}].mean_score", e["mean_score"], r["mean_score"])
        chk.abs(f"gates[{l}].histogram", e["histogram"]["share"], r["histogram"])
        chk.abs(f"gates[{l}].out_of_range", [e["histogram"]["below_range"], e["histogram"]["above_range"]],
                [r["below_range"], r["above_range"]])
        if "sparsity" in r:
            for part in ("before", "after", "mean_scaled_control"):
                chk.abs(f"gates[{l}].sparsity.{part}", [e["sparsity"][part][k] for k in ("lt_1e-2", "lt_1e-3")],
                        [r["sparsity"][part][k] for k in ("lt_1e-2", "lt_1e-3")])
            chk.rel(f"gates[{l}].mean_abs_y", e["mean_abs_y"], r["mean_abs_y"])
            chk.rel(f"gates[{l}].mean_abs_y_gated", e["mean_abs_y_gated"], r["mean_abs_y_gated"])


# ---- driver -----------------------------------------------------------------------------

def make_text(path):
    rnd = random.Random(2024)
    words = ["the", "gate", "attention", "sink", "sparse", "head", "query", "value", "layer",
             "token", "model", "résumé", "naïve", "über", "日本"]
    lines = [" ".join(rnd.choice(words) for _ in range(rnd.randint(4, 14))) for _ in range(40)]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    with open(path, "rb") as f:
        return list(f.read())


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=ENGINE_TIMEOUT_S)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return r


def run_case(name, gatedlm, workdir, stream, text_path):
    over = dict(CASES[name])
    plant = over.pop("__plant__", None)
    seq_len = over.pop("__seq_len__", SEQ_LEN)
    cfg = dict(BASE, **over)
    d = os.path.join(workdir, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    ckpt = os.path.join(d, "checkpoint")
    run([gatedlm, "init", "--config", os.path.join(d, "config.json"), "--out", ckpt, "--seed", "17", "--force"])
    if plant is not None:
        st = os.path.join(ckpt, "model.safetensors")
        tensors = safetensors_io.load(st)
        tensors["model.embed_tokens.weight"][BOS, 3] = plant
        safetensors_io.save(st, tensors)
    out = os.path.join(d, "analysis.json")
    run([gatedlm, "analyze", "--checkpoint", ckpt, "--text", text_path, "--tokenizer", "byte",
         "--sequences", str(SEQUENCES), "--seq-len", str(seq_len), "--seed", str(SEED),
         "--map-layers", ",".join(map(str, MAP_LAYERS)), "--out", out, "--quiet"])
    with open(out) as f:
        eng = json.load(f)
    model = load_checkpoint(ckpt, dtype=torch.float64)
    tokens = torch.tensor(eng["token_ids"], dtype=torch.int64)
    ref = reference_stats(model, tokens)
    chk = Checker()
    compare(eng, ref, cfg, stream, seq_len, chk)
    if plant is not None:
        counts = [m["massive_count"] for m in eng["massive_activations"]["per_layer"]]
        chk.equal("massive case has massive activations", all(c >= 1 for c in counts), True)
    return chk, eng


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gatedlm", help="path to the gatedlm binary")
    ap.add_argument("--workdir", help="keep checkpoints and outputs here (default: a temp dir)")
    ap.add_argument("--only", action="append", help="run only these configurations (comma list)")
    ap.add_argument("--list", action="store_true", help="list the configuration names")
    args = ap.parse_args(argv)
    if args.list:
        print("\n".join(CASES))
        return 0
    if not args.gatedlm:
        ap.error("--gatedlm is required")
    names = list(CASES)
    if args.only:
        names = [n for item in args.only for n in item.split(",") if n]
        unknown = [n for n in names if n not in CASES]
        if unknown:
            ap.error(f"unknown cases {unknown}; --list prints the names")
    torch.set_num_threads(2)
    tmp = None
    workdir = args.workdir
    if not workdir:
        tmp = tempfile.TemporaryDirectory(prefix="gatedlm_analysis_ref_")
        workdir = tmp.name
    os.makedirs(workdir, exist_ok=True)
    text_path = os.path.join(workdir, "text.txt")
    stream = make_text(text_path)
    passed = failed = 0
    for name in names:
        try:
            chk, eng = run_case(name, args.gatedlm, workdir, stream, text_path)
        except Exception as e:  # noqa: BLE001 - report and go on with the next case
            print(f"FAIL {name}: {e}")
            failed += 1
            continue
        summary = (f"F-Attn {eng['f_attn']['mean']:.4f}, sink {eng['sink_rate']['percent']:.1f}%, "
                   f"M-Act {eng['massive_activations']['m_act']:.4g}")
        if eng["gates"] is not None:
            summary += f", gate {eng['gates']['mean_score']:.4f}"
        if chk.failures:
            failed += 1
            print(f"FAIL {name} ({summary})")
            for f in chk.failures:
                print(f"    {f}")
        else:
            passed += 1
            print(f"ok   {name}: {chk.count} checks ({summary})")
    if tmp:
        tmp.cleanup()
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
