#!/usr/bin/python3
"""Training-step time of the Table 6 switch-head rows against the plain model.

Runs `gatedlm bench train` for the baseline and each switch row of
configs/sweep/table6.json (its base shape, vocab 4096), in ROUNDS interleaved rounds so
that a busy machine slows every variant alike, and prints the median step time of each
and its ratio to the baseline. Usage:
    bench/switch_heads_speed.py --gatedlm build/gatedlm [--rounds 3] [--steps 10]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gatedlm", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=128)
    args = ap.parse_args()
    with open(os.path.join(HERE, "..", "configs", "sweep", "table6.json")) as f:
        spec = json.load(f)
    base = dict(spec["base"], vocab_size=4096)
    rows = [(v["label"], v.get("model", {})) for v in spec["variants"]]
    times = {label: [] for label, _ in rows}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for i, (label, patch) in enumerate(rows):
                path = os.path.join(tmp, f"{i}.json")
                with open(path, "w") as f:
                    json.dump({**base, **patch}, f)
                out = subprocess.run([args.gatedlm, "bench", "train", "--config", path, "--steps", str(args.steps),
                                      "--batch-size", str(args.batch_size), "--seq-len", str(args.seq_len)],
                                     check=True, capture_output=True, text=True).stdout
                times[label].append(json.loads(out[out.index("{"):])["median_ms"])
                print(f"round {r + 1}/{args.rounds}: {label}: {times[label][-1]:.1f} ms", flush=True)
    base_ms = statistics.median(times[rows[0][0]])
    print(f"\n| row | step ms (median of {args.rounds} medians) | vs baseline |\n| --- | --- | --- |")
    for label, _ in rows:
        ms = statistics.median(times[label])
        print(f"| {label} | {ms:.1f} | {ms / base_ms:.2f}x |")


if __name__ == "__main__":
    main()
