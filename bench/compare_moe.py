#!/usr/bin/env python3
"""Training speed of a mixture-of-experts model: gatedlm against PyTorch, same shape, one script.

For each shape (bench/configs/moe_*.json: a Qwen3-style decoder whose every FFN is an MoE
block) both sides train on a fixed random batch for the same number of steps, AdamW, the
auxiliary losses included:
  - gatedlm: `gatedlm bench train` (tokens grouped per expert, one oneDNN product per expert,
    src/model/moe.h), whose JSON also gives the milliseconds per step in the block's parts
    (routing = router product + softmax + top-k + grouping; permute = gathering rows per
    expert and combining them back; experts; shared expert);
  - PyTorch eager (bench/torch_peer.py, MoeFFN): the usual loop over experts of Hugging
    Face's Qwen2-MoE / Qwen3-MoE blocks (topk, one_hot mask, index_add_), 2 threads,
    OMP_WAIT_POLICY=PASSIVE; gatedlm likewise with GATEDLM_OPENMP_WAITING=passive (the
    faster setting for both on a shared machine, docs/cpus-and-threads.md "Shared cores").
The two sides alternate (engine, torch, engine, torch) and each reports the median over
its rounds, so a busy moment of the machine hits both.

Usage: /usr/bin/python3 bench/compare_moe.py [--gatedlm build/gatedlm] [--shapes a,b]
       [--batch 16] [--seq 256] [--steps 5] [--warmup 2] [--rounds 2]
Prints a markdown report (paste it into bench/RESULTS.md with the command)."""
import argparse
import json
import os
import statistics
import subprocess
import sys

from torch_blas import fair_torch_blas

HERE = os.path.dirname(os.path.abspath(__file__))


def run_json(cmd, env_extra):
    env = dict(os.environ)
    env.update(env_extra)
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"failed ({out.returncode}): {' '.join(cmd)}\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gatedlm", default=os.path.join(HERE, "..", "build", "gatedlm"))
    ap.add_argument("--shapes", default="a,b")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    threads = str(a.threads)
    common = ["--batch-size", str(a.batch), "--seq-len", str(a.seq), "--steps", str(a.steps),
              "--warmup-steps", str(a.warmup)]
    torch_version = subprocess.run(["/usr/bin/python3", "-c", "import torch;print(torch.__version__)"],
                                   capture_output=True, text=True).stdout.strip()
    blas = fair_torch_blas(a.threads, minimum_gflops=6)
    print(f"# MoE training step: gatedlm vs PyTorch {torch_version} (loop over experts)\n\n{blas}\n")
    print(f"batch {a.batch} x seq {a.seq}, {a.steps} timed steps after {a.warmup} warm-up, {a.rounds} alternating "
          f"rounds per side, {threads} threads each\n")
    print("| shape | gatedlm ms/step | PyTorch ms/step | speed-up | routing % | permute % | experts % | shared % |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in a.shapes.split(","):
        cfg = os.path.join(HERE, "configs", f"moe_{name}.json")
        c = json.load(open(cfg))
        engine_ms, torch_ms, parts = [], [], []
        for _ in range(a.rounds):
            r = run_json([a.gatedlm, "bench", "train", "--config", cfg] + common,
                         {"OMP_NUM_THREADS": threads, "GATEDLM_OPENMP_WAITING": "passive"})
            engine_ms.append(r["median_ms"])
            parts.append({k: v / r["median_ms"] * 100 for k, v in r["moe_ms"].items()})
            t = run_json(["/usr/bin/python3", os.path.join(HERE, "torch_peer.py"), "--config", cfg,
                          "--threads", threads] + common, {"OMP_WAIT_POLICY": "PASSIVE"})
            torch_ms.append(statistics.median(t["step_ms"]))
        e, t = statistics.median(engine_ms), statistics.median(torch_ms)
        share = {k: statistics.median(p[k] for p in parts) for k in parts[0]}
        m = c["moe"]
        label = (f"{name}: {c['n_layers']} x (d {c['d_model']}, {m['n_experts']} experts top-{m['top_k']} "
                 f"x {m['expert_hidden']}" + (f", shared {m['n_shared'] * m.get('shared_hidden', 0)}"
                                              if m.get("n_shared") else "") + ")")
        print(f"| {label} | {e:.1f} | {t:.1f} | **{t / e:.2f}x** | {share['routing']:.1f} | {share['permute']:.1f} | "
              f"{share['experts']:.1f} | {share['shared']:.1f} |")
    print("\nrouting: router product, softmax, top-k and the grouping of tokens per expert, forward and "
          "backward; permute: gathering each expert's rows and combining the k rows of each token back; "
          "shares of gatedlm's median step.")


if __name__ == "__main__":
    main()
