#!/usr/bin/env python3
"""Speed of two gatedlm binaries in alternated pairs: a refactoring must leave it in noise.

  bench/refactor_speed.py --before OLD/gatedlm --after build/gatedlm [--pairs 3]

Per pair, in turn (before, after): `bench generate` decode tokens/s at batch 1 and 8 for the
100M shape in F32 and Q4_0 and the Qwen3.5-shaped hybrid in F32 (random weights), and
`bench train` tokens/s for shape A. Prints the median of the per-pair ratios after / before
for each measure (1.00 = the same speed) with their range, as a Markdown table.
"""
import argparse
import json
import os
import statistics
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = os.path.join(HERE, "configs")
DECODE = [("qwen3_100m", "f32"), ("qwen3_100m", "q4_0"), ("qwen35_hybrid_150m", "f32")]


def run_json(cmd):
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def measure(binary):
    """{measure name: tokens/s} of one binary."""
    result = {}
    for shape, weights in DECODE:
        j = run_json([binary, "bench", "generate", "--config", os.path.join(CONFIGS, shape + ".json"), "--weights",
                      weights, "--batch", "1,8", "--prompt-tokens", "64", "--new-tokens", "32", "--reps", "2"])
        for run in j["runs"]:
            result[f"decode {shape} {weights} batch {run['batch']}"] = run["decode_tokens_per_s"]
    j = run_json([binary, "bench", "train", "--config", os.path.join(CONFIGS, "shape_a.json"), "--steps", "4",
                  "--warmup-steps", "1"])
    result["train shape_a"] = j["tokens_per_s"]
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--pairs", type=int, default=3)
    args = ap.parse_args()
    ratios = {}
    for _ in range(args.pairs):
        before, after = measure(args.before), measure(args.after)
        for name in before:
            ratios.setdefault(name, []).append((before[name], after[name]))
    print("| measure | before tok/s (median) | after tok/s (median) | after / before, median of pairs (range) |")
    print("| --- | ---: | ---: | --- |")
    for name, pairs in ratios.items():
        r = [a / b for b, a in pairs]
        print(f"| {name} | {statistics.median(b for b, _ in pairs):.1f} | {statistics.median(a for _, a in pairs):.1f} "
              f"| {statistics.median(r):.3f} ({min(r):.3f}-{max(r):.3f}) |")


if __name__ == "__main__":
    main()
