#!/usr/bin/env python3
"""Training throughput when the cores are shared (issue 14), with each OpenMP waiting
setting, and PyTorch's beside it, in one run of this script:

  - alone on the machine;
  - beside a single-threaded busy loop;
  - two identical trainings at once (each one's throughput).

Settings: gatedlm's default (libgomp's spin), a bounded spin (GOMP_SPINCOUNT=10000),
OMP_WAIT_POLICY=passive (what GATEDLM_OPENMP_WAITING=passive sets); PyTorch as installed and
with OMP_WAIT_POLICY=PASSIVE. The model is the TinyShakespeare setting (4 layers, d_model
128, batch 12 x 64), timed by `gatedlm bench train` / bench/torch_peer.py on a fixed batch.

Usage: /usr/bin/python3 bench/shared_cores.py [--gatedlm build/gatedlm] [--steps 60]
Run it on an otherwise quiet machine; it prints a markdown table for bench/RESULTS.md."""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = os.path.join(HERE, "..", "configs", "shakespeare-char.json")
BATCH, SEQ = 12, 64


def command(kind, gatedlm, steps):
    common = ["--config", CONFIG, "--batch-size", str(BATCH), "--seq-len", str(SEQ), "--steps", str(steps),
              "--warmup-steps", "5"]
    if kind == "gatedlm":
        return [gatedlm, "bench", "train"] + common
    return ["/usr/bin/python3", os.path.join(HERE, "torch_peer.py")] + common


def tokens_per_s(out):
    r = json.loads(out.strip().splitlines()[-1])
    return BATCH * SEQ / (statistics.median(r["step_ms"]) / 1e3)


def run_all(cmds, env):
    procs = [subprocess.Popen(c, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for c in cmds]
    outs = []
    for p in procs:
        out, err = p.communicate()
        if p.returncode != 0:
            sys.exit(f"failed: {' '.join(p.args)}\n{err}")
        outs.append(tokens_per_s(out))
    return outs


def measure(cmd, env):
    alone = run_all([cmd], env)[0]
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        beside = run_all([cmd], env)[0]
    finally:
        busy.kill()
    two = run_all([cmd, cmd], env)
    return alone, beside, statistics.mean(two)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gatedlm", default=os.path.join(HERE, "..", "build", "gatedlm"))
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--skip-torch", action="store_true")
    a = ap.parse_args()
    base = {k: v for k, v in os.environ.items()
            if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "GATEDLM_OPENMP_WAITING")}
    base["OMP_NUM_THREADS"] = "2"
    settings = [("gatedlm, default (libgomp's spin)", "gatedlm", {}),
                ("gatedlm, GOMP_SPINCOUNT=10000", "gatedlm", {"GOMP_SPINCOUNT": "10000"}),
                ("gatedlm, OMP_WAIT_POLICY=passive", "gatedlm", {"OMP_WAIT_POLICY": "passive"})]
    if not a.skip_torch:
        settings += [("PyTorch as installed", "torch", {}),
                     ("PyTorch, OMP_WAIT_POLICY=PASSIVE", "torch", {"OMP_WAIT_POLICY": "PASSIVE"})]
    rows = []
    for label, kind, extra in settings:
        env = dict(base, **extra)
        rows.append((label, measure(command(kind, a.gatedlm, a.steps), env)))
    quiet_default = rows[0][1][0]
    print("| setting | alone tok/s | beside a busy loop | two at once (each) | two at once / alone |")
    print("| --- | --- | --- | --- | --- |")
    for label, (alone, beside, two) in rows:
        print(f"| {label} | {alone:,.0f} | {beside:,.0f} ({beside / alone:.0%}) | {two:,.0f} | **{two / alone:.0%}** |")
    for label, (alone, _, _) in rows[1:3]:
        print(f"\nquiet run, {label} against the default: {alone / quiet_default - 1:+.1%}")


if __name__ == "__main__":
    main()
