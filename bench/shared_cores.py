#!/usr/bin/env python3
"""Training throughput when the cores are shared (issue 14), with each OpenMP waiting
setting, and PyTorch's beside it, in one run of this script:

  - alone on the machine;
  - beside a single-threaded busy loop;
  - two identical trainings at once (each one's throughput).

Settings: gatedlm's default (libgomp's spin, the thread count adapting to the free cores:
core/thread_governor.h), the same with the count fixed at 2 (OMP_NUM_THREADS=2, the old
default), OMP_WAIT_POLICY=passive with 2 threads (what GATEDLM_OPENMP_WAITING=passive sets);
PyTorch (2 threads) as installed and with OMP_WAIT_POLICY=PASSIVE. The quiet cost of the
default against the fixed count is measured apart, alternating the two --pairs times, since
single quiet figures of this small model move by up to 30 % from run to run. The model is the TinyShakespeare setting (4 layers, d_model
128, batch 12 x 64), timed by `gatedlm bench train` / bench/torch_peer.py on a fixed batch.

Usage: /usr/bin/python3 bench/shared_cores.py [--gatedlm build/gatedlm] [--steps 60] [--pairs 6]
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


def quiet_cost(gatedlm, steps, base, pairs):
    """Median of (default / fixed 2 threads) over alternating quiet runs."""
    ratios = []
    for _ in range(pairs):
        adaptive = run_all([command("gatedlm", gatedlm, steps)], base)[0]
        fixed = run_all([command("gatedlm", gatedlm, steps)], dict(base, OMP_NUM_THREADS="2"))[0]
        ratios.append(adaptive / fixed)
    return statistics.median(ratios), ratios


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gatedlm", default=os.path.join(HERE, "..", "build", "gatedlm"))
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--skip-torch", action="store_true")
    a = ap.parse_args()
    base = {k: v for k, v in os.environ.items()
            if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "GATEDLM_OPENMP_WAITING", "GATEDLM_THREADS",
                         "OMP_NUM_THREADS")}
    two = {"OMP_NUM_THREADS": "2"}
    settings = [("gatedlm, default (spin, adaptive thread count)", "gatedlm", {}),
                ("gatedlm, spin, fixed 2 threads (OMP_NUM_THREADS=2)", "gatedlm", two),
                ("gatedlm, OMP_WAIT_POLICY=passive, 2 threads", "gatedlm", dict(two, OMP_WAIT_POLICY="passive"))]
    if not a.skip_torch:
        settings += [("PyTorch as installed", "torch", two),
                     ("PyTorch, OMP_WAIT_POLICY=PASSIVE", "torch", dict(two, OMP_WAIT_POLICY="PASSIVE"))]
    rows = []
    for label, kind, extra in settings:
        env = dict(base, **extra)
        rows.append((label, measure(command(kind, a.gatedlm, a.steps), env)))
    print("| setting | alone tok/s | beside a busy loop | two at once (each) | two at once / alone |")
    print("| --- | --- | --- | --- | --- |")
    for label, (alone, beside, two_each) in rows:
        print(f"| {label} | {alone:,.0f} | {beside:,.0f} ({beside / alone:.0%}) | {two_each:,.0f} "
              f"| **{two_each / alone:.0%}** |")
    median, ratios = quiet_cost(a.gatedlm, a.steps, base, a.pairs)
    print(f"\nquiet run, default against the fixed 2 threads, {a.pairs} alternating pairs: median {median - 1:+.1%} "
          f"(each: {', '.join(f'{r - 1:+.1%}' for r in ratios)})")


if __name__ == "__main__":
    main()
