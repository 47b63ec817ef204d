#!/usr/bin/python3
"""Training speed of a hybrid model (Gated DeltaNet layers beside gated softmax layers, issue
23): gatedlm against PyTorch, same model, same threads, one script.

The model is bench/configs/hybrid_train.json: 8 layers, d_model 512, 3 linear : 1 full
(full_attention_interval 4), linear layers with n_k = n_v = 4 heads of 128, softmax layers
with the G1 gate, 8 query / 2 KV heads of 64 and rope over a quarter of the head, zero-centred
norms. A training step is forward + backward + AdamW on a fixed random batch:
  - gatedlm: `gatedlm bench train` (its chunked delta rule, hand-written backward),
    OMP_NUM_THREADS = --threads, GATEDLM_OPENMP_WAITING=passive;
  - PyTorch eager: the PyTorch reference model (tests/reference/reference_model.py +
    hybrid_reference.py, float32) whose linear layers run the pure-PyTorch chunked delta rule
    that transformers falls back to without its CUDA kernels (chunks of 64, the UT transform
    by torch.linalg.solve_triangular, a Python loop over chunks, autograd for the backward),
    torch.set_num_threads(--threads), OMP_WAIT_POLICY=PASSIVE, in a process of its own.
The two sides alternate (gatedlm, PyTorch, gatedlm, ...) and the speed-up is the median of
the per-pair ratios, so a busy moment of the machine hits both. A second table shows how the
step time grows from sequence 512 to 4096 (batch 1) for the hybrid and for the same model with
every layer linear (whose time per token should stay flat: the delta rule is linear in T).

While gatedlm does not know the hybrid config keys (`unknown key "..."`), its columns say so
and only PyTorch is timed.

Usage: /usr/bin/python3 bench/compare_hybrid_train.py [--gatedlm build/gatedlm] [--threads 2]
       [--batch 4] [--seq 512] [--steps 3] [--warmup 1] [--rounds 3]
       [--growth-seqs 512,1024,2048,4096] [--growth-steps 2] [--no-growth] [--torch-flush-denormal]
Prints a markdown report (for bench/RESULTS.md, with `lscpu`'s model name). Needs PyTorch on
OpenBLAS (`apt-get install libopenblas0-pthread`): with Debian's reference BLAS alone PyTorch
is ~10x slower and the script refuses to compare, as bench/compare_pytorch.py does; where
OpenBLAS fell back to its generic kernels on an unknown CPU, its kernels for this CPU's
instruction set are set (bench/torch_blas.py), and the report names them.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from torch_blas import fair_torch_blas

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = os.path.join(HERE, "configs", "hybrid_train.json")


# ---- the PyTorch side (run as a subprocess: --torch-side) -------------------------------

def torch_side(a):
    """Times a.steps training steps after a.warmup; prints JSON {step_ms, peak_rss_bytes}."""
    import resource
    import torch
    sys.dont_write_bytecode = True
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))
    from reference_model import GatedLM, config_from_file
    torch.set_num_threads(a.threads)
    if a.torch_flush_denormal:
        torch.set_flush_denormal(True)
    torch.manual_seed(0)
    model = GatedLM(config_from_file(a.config)).to(torch.float32)
    params = list(model.parameters())
    opt = torch.optim.AdamW([{"params": [p for p in params if p.ndim >= 2], "weight_decay": 0.1},
                             {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}],
                            lr=1e-4, betas=(0.9, 0.95))
    # seq + 1 ids: the loss predicts ids 1..seq from 0..seq-1, as a step of seq tokens
    tokens = torch.randint(0, model.cfg.vocab_size, (a.batch, a.seq + 1))
    times = []
    for i in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = _step_loss(model, tokens)
        loss.backward()
        opt.step()
        if i >= a.warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"step_ms": times, "median_ms": statistics.median(times), "peak_rss_bytes": rss,
                      "loss": float(loss)}))


def _step_loss(model, tokens):
    import torch.nn.functional as F
    logits = model(tokens[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))


# ---- the driver -------------------------------------------------------------------------

def run_json(cmd, env_extra):
    """(JSON of the last stdout line, None) or (None, why)."""
    env = {**os.environ, **env_extra}
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        return None, (p.stderr or p.stdout).strip()[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1]), None


class Sides:
    """Runs one timed measurement of either side for a config, batch and sequence length."""

    def __init__(self, a):
        self.a = a
        self.engine_missing = None   # why gatedlm cannot run hybrids, once known

    def engine(self, config, batch, seq, steps, warmup):
        if self.engine_missing:
            return None
        r, err = run_json([self.a.gatedlm, "bench", "train", "--config", config, "--batch-size", str(batch),
                           "--seq-len", str(seq), "--steps", str(steps), "--warmup-steps", str(warmup)],
                          {"OMP_NUM_THREADS": str(self.a.threads), "GATEDLM_OPENMP_WAITING": "passive"})
        if r is None:
            if 'unknown key "' in err:
                self.engine_missing = err.splitlines()[-1]
                return None
            sys.exit(f"gatedlm bench train failed:\n{err}")
        return r

    def torch(self, config, batch, seq, steps, warmup):
        r, err = run_json(["/usr/bin/python3", os.path.abspath(__file__), "--torch-side", "--config", config,
                           "--threads", str(self.a.threads), "--batch", str(batch), "--seq", str(seq),
                           "--steps", str(steps), "--warmup", str(warmup)]
                          + (["--torch-flush-denormal"] if self.a.torch_flush_denormal else []),
                          {"OMP_WAIT_POLICY": "PASSIVE"})
        if r is None:
            sys.exit(f"PyTorch side failed:\n{err}")
        return r


def delta_share(r):
    """gatedlm's share of the mean step in the delta-rule kernels (delta_rule_share of `bench
    train`'s JSON), and of the linear layers' token mixers (deltanet_ms: the in/out products,
    the delta rule and the elementwise parts, summed over layers)."""
    if not r or "delta_rule_share" not in r:
        return "not reported"
    mean_ms = statistics.mean(r["step_ms"])
    mixer = sum(r["deltanet_ms"].values())
    return f"delta rule {100.0 * r['delta_rule_share']:.1f} % (linear mixers {100.0 * mixer / mean_ms:.0f} %)"


def main_table(a, sides):
    e_ms, t_ms, ratios, shares = [], [], [], []
    for _ in range(a.rounds):
        e = sides.engine(CONFIG, a.batch, a.seq, a.steps, a.warmup)
        t = sides.torch(CONFIG, a.batch, a.seq, a.steps, a.warmup)
        t_ms.append(t["median_ms"])
        if e:
            e_ms.append(e["median_ms"])
            ratios.append(t["median_ms"] / e["median_ms"])
            shares.append(delta_share(e))
    print(f"## Training step, batch {a.batch} x seq {a.seq}, {a.steps} timed steps after {a.warmup} "
          f"warm-up, {a.rounds} alternating rounds, {a.threads} threads each\n")
    print("| model | gatedlm ms/step | PyTorch ms/step | speed-up (median of pairs) | gatedlm delta-rule share |")
    print("| --- | --- | --- | --- | --- |")
    if e_ms:
        print(f"| hybrid 3:1, 8 x d512 | {statistics.median(e_ms):.0f} | {statistics.median(t_ms):.0f} | "
              f"**{statistics.median(ratios):.2f}x** (pairs {', '.join(f'{r:.2f}' for r in ratios)}) | "
              f"{shares[-1]} |")
    else:
        print(f"| hybrid 3:1, 8 x d512 | n/a: {sides.engine_missing} | {statistics.median(t_ms):.0f} | n/a | n/a |")
    print()


def all_linear_config(tmpdir):
    c = json.load(open(CONFIG))
    c.pop("full_attention_interval", None)
    c["layer_types"] = ["linear_attention"] * c["n_layers"]
    path = os.path.join(tmpdir, "hybrid_all_linear.json")
    with open(path, "w") as f:
        json.dump(c, f)
    return path


def growth_table(a, sides, tmpdir):
    seqs = [int(s) for s in a.growth_seqs.split(",")]
    models = [("hybrid 3:1", CONFIG), ("all linear", all_linear_config(tmpdir))]
    print(f"## Step time against sequence length (batch 1, {a.growth_steps} timed steps after 1 warm-up, "
          f"{a.threads} threads)\n")
    print("ms per 1k tokens; growth = time per token relative to sequence " f"{seqs[0]}; gatedlm's linear "
          "mixers and delta rule: their ms per 1k tokens (deltanet_ms of bench train, means over the steps).\n")
    print("| model | seq | gatedlm ms/step | gatedlm ms/1k tok | growth | linear mixers ms/1k tok | delta rule "
          "ms/1k tok | PyTorch ms/step | PyTorch ms/1k tok | growth | speed-up |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for label, config in models:
        base_e = base_t = None
        for seq in seqs:
            e = sides.engine(config, 1, seq, a.growth_steps, 1)
            t = sides.torch(config, 1, seq, a.growth_steps, 1)
            tk = t["median_ms"] / seq * 1000
            base_t = base_t or tk
            if e:
                ek = e["median_ms"] / seq * 1000
                base_e = base_e or ek
                parts = e.get("deltanet_ms", {})
                mixers = f"{sum(parts.values()) / seq * 1000:.1f}" if parts else "n/a"
                rule = f"{parts['delta_rule'] / seq * 1000:.1f}" if parts else "n/a"
                ecols = f"{e['median_ms']:.0f} | {ek:.1f} | {ek / base_e:.2f} | {mixers} | {rule}"
                speed = f"{t['median_ms'] / e['median_ms']:.2f}x"
            else:
                ecols, speed = "n/a | n/a | n/a | n/a | n/a", "n/a"
            print(f"| {label} | {seq} | {ecols} | {t['median_ms']:.0f} | {tk:.1f} | {tk / base_t:.2f} | {speed} |")
            sys.stdout.flush()
    print()


def header(a, blas):
    cpu = next((line.split(":", 1)[1].strip() for line in
                subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
                if line.startswith("Model name")), "unknown")
    torch_version = subprocess.run(["/usr/bin/python3", "-c", "import torch;print(torch.__version__)"],
                                   capture_output=True, text=True).stdout.strip()
    print(f"# Hybrid training step: gatedlm vs PyTorch {torch_version} (pure-PyTorch chunked delta rule)\n")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"CPU: {cpu} ({os.cpu_count()} logical CPUs visible; load average {load} at the start: "
          f"the machine may be shared); config bench/configs/hybrid_train.json; "
          f"command: {' '.join(sys.argv)}  \n{blas}\n")
    if a.torch_flush_denormal:
        print("PyTorch flushes subnormals to zero (torch.set_flush_denormal(True)), as gatedlm's "
              "chunked delta rule does; PyTorch's default keeps them.\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gatedlm", default=os.path.join(HERE, "..", "build", "gatedlm"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--growth-seqs", default="512,1024,2048,4096")
    ap.add_argument("--growth-steps", type=int, default=2)
    ap.add_argument("--no-growth", action="store_true")
    ap.add_argument("--torch-flush-denormal", action="store_true",
                    help="PyTorch's side flushes subnormal floats to zero (torch.set_flush_denormal), "
                         "as gatedlm's chunked delta rule does; without it PyTorch runs as users run it")
    ap.add_argument("--torch-side", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--config", default=CONFIG, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.torch_side:
        return torch_side(a)
    header(a, fair_torch_blas(a.threads, minimum_gflops=6))
    sides = Sides(a)
    main_table(a, sides)
    if not a.no_growth:
        with tempfile.TemporaryDirectory() as tmpdir:
            growth_table(a, sides, tmpdir)
    if sides.engine_missing:
        print(f"gatedlm could not run the hybrid config: {sides.engine_missing}")
    print(f"load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
