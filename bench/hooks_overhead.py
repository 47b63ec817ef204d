#!/usr/bin/env python3
"""The cost of activation hooks from Python (docs/python.md, "Hooks"): the plain forward of 256
tokens against the same forward with a no-op Python hook on every layer's residual stream
(hook_resid_post), and with one on every hook point, timed in alternated rounds in one
process (the machine's load moves all three alike). The issue's target: a no-op hook per
layer within 10 % of the plain forward.

    PYTHONPATH=build/python /usr/bin/python3 bench/hooks_overhead.py [--rounds 15] [--tokens 256]
"""
import argparse
import statistics
import time

import numpy as np

import gatedlm

# The demo's model shape (docs/demo.md): 6 layers of d_model 256, G1-gated.
CONFIG = {"vocab_size": 258, "d_model": 256, "n_layers": 6, "n_heads": 4, "n_kv_heads": 4, "head_dim": 64,
          "ffn_hidden": 704, "max_seq_len": 512,
          "gate": {"position": "sdpa", "granularity": "elementwise", "activation": "sigmoid"}}


def seconds(f, repeats):
    start = time.perf_counter()
    for _ in range(repeats):
        f()
    return (time.perf_counter() - start) / repeats


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--repeats", type=int, default=3, help="forwards per timing")
    p.add_argument("--tokens", type=int, default=256)
    args = p.parse_args()
    model = gatedlm.Model.init(CONFIG, seed=1)
    ids = np.random.default_rng(0).integers(1, 258, size=(1, args.tokens))
    per_layer = {f"blocks.{l}.hook_resid_post": (lambda x, n: None) for l in range(CONFIG["n_layers"])}
    every = {n: (lambda x, n: None) for n in model.hook_names()}
    cases = {"plain forward": lambda: model.forward(ids),
             "no-op hook per layer": lambda: model.run_with_hooks(ids, per_layer),
             f"no-op hook on all {len(every)} points": lambda: model.run_with_hooks(ids, every)}
    for f in cases.values():  # warm up buffers and threads
        f()
    times = {name: [] for name in cases}
    for _ in range(args.rounds):
        for name, f in cases.items():
            times[name].append(seconds(f, args.repeats))
    plain = times["plain forward"]
    print(f"{args.tokens} tokens, {CONFIG['n_layers']} layers, d_model {CONFIG['d_model']}, "
          f"{args.rounds} alternated rounds of {args.repeats} forwards")
    print("| case | median ms | median ratio to the plain forward (range) |")
    print("| --- | ---: | --- |")
    for name, t in times.items():
        ratios = [a / b for a, b in zip(t, plain)]
        print(f"| {name} | {1e3 * statistics.median(t):.2f} | {statistics.median(ratios):.3f} "
              f"({min(ratios):.3f}-{max(ratios):.3f}) |")


if __name__ == "__main__":
    main()
