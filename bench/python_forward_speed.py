#!/usr/bin/env python3
"""What calling forward from Python costs over the same forward in C++ (issue 25).

Times gatedlm.Model.forward (ids from NumPy, logits copied out to a new NumPy array) against
`gatedlm bench train --forward-only` (the C++ forward on the same shape, in one process,
no Python) on the same config, alternating the two several rounds so that a busy machine
slows both alike; prints one JSON line per round and the ratio of the medians.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_forward_speed.py \
        --gatedlm build/gatedlm --config bench/configs/qwen3_100m.json --batch 1 --seq 512
"""
import argparse
import json
import statistics
import subprocess
import time

import numpy as np

import gatedlm


def cpp_median_ms(args):
    r = subprocess.run([args.gatedlm, "bench", "train", "--config", args.config, "--forward-only", "--batch-size",
                        str(args.batch), "--seq-len", str(args.seq), "--steps", str(args.reps), "--warmup-steps", "1"],
                       capture_output=True, text=True, check=True)
    result = json.loads(r.stdout.strip().splitlines()[-1])
    return result["median_ms"], min(result["step_ms"])


def python_median_ms(model, ids, reps):
    model.forward(ids)  # warm-up: buffers sized, pages touched
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        model.forward(ids)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times), min(times)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gatedlm", default="build/gatedlm")
    p.add_argument("--config", default="bench/configs/qwen3_100m.json")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--reps", type=int, default=5, help="timed forwards per round and side")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    model = gatedlm.Model.init(args.config, seed=1)
    vocab = model.config["vocab_size"]
    ids = np.random.default_rng(0).integers(0, vocab, size=(args.batch, args.seq), dtype=np.int32)
    cpp, py = [], []  # per round: (median, min) of the timed forwards
    for r in range(args.rounds):
        cpp.append(cpp_median_ms(args))
        py.append(python_median_ms(model, ids, args.reps))
        print(json.dumps({"round": r, "cpp_median_ms": round(cpp[-1][0], 2), "python_median_ms": round(py[-1][0], 2),
                          "cpp_min_ms": round(cpp[-1][1], 2), "python_min_ms": round(py[-1][1], 2)}), flush=True)
    median = [statistics.median(m for m, _ in side) for side in (cpp, py)]
    best = [min(b for _, b in side) for side in (cpp, py)]  # the least disturbed forward of each side
    print(json.dumps({"config": args.config, "batch": args.batch, "seq": args.seq, "n_params": model.n_params,
                      "cpp_median_ms": round(median[0], 2), "python_median_ms": round(median[1], 2),
                      "python_over_cpp_median": round(median[1] / median[0], 4), "cpp_min_ms": round(best[0], 2),
                      "python_min_ms": round(best[1], 2), "python_over_cpp_min": round(best[1] / best[0], 4)}))


if __name__ == "__main__":
    main()
