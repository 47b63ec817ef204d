#!/usr/bin/env python3
"""Training speed of gatedlm against PyTorch on the same machine, in one run.

For each shape: the same model (Qwen3-style decoder; the G1 gate where named) trained on a
fixed random batch for the same number of steps, after warm-up steps, in
  - gatedlm fp32 and bf16 (`gatedlm bench train`), with and without the G1 elementwise gate,
    and forward-only (evaluation / prefill); the gate's cost from `gatedlm bench gate` (both
    models in one process, steps interleaved, so machine noise hits both alike);
  - PyTorch eager (bench/torch_peer.py, /usr/bin/python3, torch.set_num_threads(2)), as
    installed and with OMP_WAIT_POLICY=PASSIVE, fp32 and bf16 autocast, with and without
    the gate as a separate projection.
The machine's fp32 peak is measured in the same run by a large oneDNN sgemm.

Usage: /usr/bin/python3 bench/compare_pytorch.py [--gatedlm build/gatedlm] [--shapes A,B,C]
       [--steps 5] [--warmup 2] [--quick]
Prints a markdown report (paste it into bench/RESULTS.md with the command).

PyTorch's matrix products go through the system BLAS: install OpenBLAS
(`apt-get install libopenblas0-pthread`) first. With Debian's reference BLAS alone
(libblas3), PyTorch runs about 10x slower, which would make it a strawman; the script
refuses to run then. Where OpenBLAS fell back to its generic kernels on a CPU it does not know,
the kernels of this CPU's instruction set are set for PyTorch (bench/torch_blas.py).

bf16 rows need bf16 units (AVX512-BF16 or AMX). Where `gatedlm --version` says the bf16
products are emulated (an AVX2-only CPU, say), both bf16 rows are left out and the report
says so: the emulation keeps the numerics but is slower than fp32, and PyTorch's bf16
autocast is as slow there, so no bf16 speed is there to compare."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from torch_blas import fair_torch_blas

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPES = {
    "A": ("shape_a.json", 16, 256),
    "B": ("shape_b.json", 8, 512),
    "C": ("shape_a.json", 2, 2048),
}
FORMULA = "FLOP/step = 6 * matmul_params * tokens + 12 * n_layers * seq_len * d_attn * tokens (d_attn = n_heads * head_dim)"


def run_json(cmd, env_extra=None):
    env = dict(os.environ)
    env.update(env_extra or {})
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"failed ({out.returncode}): {' '.join(cmd)}\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def gated_config(path):
    c = json.load(open(path))
    c["gate"] = {"position": "sdpa"}
    f = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    json.dump(c, f)
    f.close()
    return f.name


def flops(c, batch, seq, gate):
    d, hq, hk, dk, f, v, L = (c[k] for k in ("d_model", "n_heads", "n_kv_heads", "head_dim", "ffn_hidden",
                                             "vocab_size", "n_layers"))
    per_layer = d * hq * dk * 2 + d * hk * dk * 2 + 3 * d * f + (d * hq * dk if gate else 0)
    matmul_params = L * per_layer + v * d
    tokens = batch * seq
    return 6 * matmul_params * tokens + 12 * L * seq * hq * dk * tokens


def stats(ms):
    return statistics.median(ms), min(ms), max(ms)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gatedlm", default=os.path.join(HERE, "..", "build", "gatedlm"))
    ap.add_argument("--shapes", default="A,B,C")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="skip the gate and forward-only variants")
    ap.add_argument("--skip-torch-bf16", action="store_true")
    ap.add_argument("--gate-steps", type=int, default=12,
                    help="steps of each model in `gatedlm bench gate` (interleaved) for the G1 gate's cost")
    a = ap.parse_args()
    blas = fair_torch_blas(2, minimum_gflops=20)
    env_engine = {"OMP_NUM_THREADS": "2"}
    version = subprocess.run([a.gatedlm, "--version"], capture_output=True, text=True).stdout
    bf16_line = next((l for l in version.splitlines() if l.startswith("bf16 products:")), "bf16 products: unknown")
    bf16_native = bf16_line.startswith("bf16 products: native")
    peak = run_json([a.gatedlm, "bench", "sgemm", "--n", "2048", "--reps", "5"], env_engine)["gflops"]
    print(f"# Training speed: gatedlm vs PyTorch {subprocess.run(['/usr/bin/python3', '-c', 'import torch;print(torch.__version__)'], capture_output=True, text=True).stdout.strip()}\n")
    print(f"measured fp32 peak (oneDNN sgemm 2048^3, 2 threads): **{peak:.0f} GFLOP/s**  \n{blas}  \n{FORMULA}\n")
    if not bf16_native:
        print(f"bf16: **unavailable on this CPU**, rows left out ({bf16_line})\n")
    for name in a.shapes.split(","):
        cfg_file, batch, seq = SHAPES[name]
        cfg = os.path.join(HERE, "configs", cfg_file)
        c = json.load(open(cfg))
        gcfg = gated_config(cfg)
        tokens = batch * seq
        rows = []

        def engine(label, config, extra, gate=False, forward=False):
            r = run_json([a.gatedlm, "bench", "train", "--config", config, "--batch-size", str(batch), "--seq-len",
                          str(seq), "--steps", str(a.steps), "--warmup-steps", str(a.warmup)] + extra, env_engine)
            fl = flops(c, batch, seq, gate) / (3 if forward else 1)
            rows.append((label, r["step_ms"], fl, r["peak_rss_bytes"]))

        def torch(label, extra, env, gate=False):
            r = run_json(["/usr/bin/python3", os.path.join(HERE, "torch_peer.py"), "--config", cfg, "--batch-size",
                          str(batch), "--seq-len", str(seq), "--steps", str(a.steps), "--warmup-steps",
                          str(a.warmup)] + extra, env)
            rows.append((label, r["step_ms"], flops(c, batch, seq, gate), r["peak_rss_bytes"]))

        passive = {"OMP_WAIT_POLICY": "PASSIVE"}
        engine("gatedlm fp32", cfg, [])
        if bf16_native:
            engine("gatedlm bf16", cfg, ["--bf16"])
        torch("PyTorch fp32 (as installed)", [], {})
        torch("PyTorch fp32 (OMP_WAIT_POLICY=PASSIVE)", [], passive)
        if bf16_native and not a.skip_torch_bf16:
            torch("PyTorch bf16 autocast (PASSIVE)", ["--bf16"], passive)
        if not a.quick:
            engine("gatedlm fp32 + G1 gate", gcfg, [], gate=True)
            torch("PyTorch fp32 + G1 gate (PASSIVE)", ["--gate"], passive, gate=True)
            engine("gatedlm forward only (fp32)", cfg, ["--forward-only"], forward=True)
        print(f"## Shape {name}: {c['n_layers']} layers, d_model {c['d_model']}, {c['n_heads']}x{c['head_dim']} heads "
              f"({c['n_kv_heads']} kv), ffn {c['ffn_hidden']}, vocab {c['vocab_size']}, seq {seq}, batch {batch}\n")
        print("| run | ms/step median (min-max) | tokens/s | GFLOP/s | % of fp32 peak | peak RSS |")
        print("| --- | --- | --- | --- | --- | --- |")
        by_label = {}
        for label, ms, fl, rss in rows:
            med, lo, hi = stats(ms)
            by_label[label] = med
            print(f"| {label} | {med:.0f} ({lo:.0f}-{hi:.0f}) | {tokens / med * 1e3:.0f} | {fl / med / 1e6:.1f} | "
                  f"{fl / med / 1e6 / peak * 100:.0f} % | {rss / 2**30:.2f} GiB |")
        print()

        def ratio(x, y):
            if x in by_label and y in by_label:
                print(f"- {x} is **{by_label[y] / by_label[x]:.2f}x** the speed of {y}")
        ratio("gatedlm fp32", "PyTorch fp32 (as installed)")
        ratio("gatedlm fp32", "PyTorch fp32 (OMP_WAIT_POLICY=PASSIVE)")
        ratio("gatedlm bf16", "PyTorch bf16 autocast (PASSIVE)")
        if "gatedlm fp32 + G1 gate" in by_label:
            share = flops(c, batch, seq, True) / flops(c, batch, seq, False) - 1
            # The table's two runs are minutes apart; the cost is measured with both models in
            # one process, their steps interleaved (`gatedlm bench gate`).
            r = run_json([a.gatedlm, "bench", "gate", "--config", cfg, "--batch-size", str(batch), "--seq-len",
                          str(seq), "--steps", str(a.gate_steps), "--warmup-steps", str(a.warmup)], env_engine)
            q = sorted(r["step_ratios"])
            print(f"- G1 gate: gatedlm step time **{(r['median_ratio'] - 1) * 100:+.1f} %** for "
                  f"+{share * 100:.1f} % FLOPs (median of {len(q)} interleaved step pairs; quartiles "
                  f"{(q[len(q) // 4] - 1) * 100:+.1f} % / {(q[3 * len(q) // 4] - 1) * 100:+.1f} %)")
            tg = by_label["PyTorch fp32 + G1 gate (PASSIVE)"] / by_label["PyTorch fp32 (OMP_WAIT_POLICY=PASSIVE)"] - 1
            print(f"- G1 gate: PyTorch step time {tg * 100:+.1f} % (the table's runs)")
        print()
        os.unlink(gcfg)


if __name__ == "__main__":
    main()
