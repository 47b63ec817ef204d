#!/usr/bin/env python3
"""The ring-allreduce cost model of docs/scaling.md, as tables.

Per optimizer step, every rank sends and receives 2 (N-1)/N of the gradient buffer
(S bytes: 8 per parameter, float64 sums, dist/gradient_sum.h) and pays 2 (N-1) message
latencies per bucket:

    T_ar(N) = 2 (N-1)/N * S / B  +  2 (N-1) * ceil(S / bucket) * alpha

The step's compute is split across the N nodes (the global batch does not depend on N):

    T_c(N) = (6 P + 12 L s d_attn) * tokens_per_step / (N * F)

and, with the allreduce after the backward (no overlap), the scaling efficiency is
E(N) = T_c(N) / (T_c(N) + T_ar(N)).

Usage: bench/scaling_model.py [--gatedlm build/gatedlm]   (prints markdown)
"""
import argparse
import json
import math
import subprocess
import tempfile

GBIT = 1e9 / 8  # bytes/s per Gb/s


def params_of(gatedlm, config):
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(config, f)
        f.flush()
        out = subprocess.run([gatedlm, "params", "--config", f.name, "--json"], check=True, capture_output=True,
                             text=True).stdout
    return json.loads(out)["total"]


def allreduce_s(nodes, grad_bytes, link_bytes_s, alpha_s, bucket_bytes):
    if nodes == 1:
        return 0.0
    buckets = math.ceil(grad_bytes / bucket_bytes)
    return 2 * (nodes - 1) / nodes * grad_bytes / link_bytes_s + 2 * (nodes - 1) * buckets * alpha_s


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gatedlm", default="build/gatedlm")
    ap.add_argument("--node-tflops", type=float, default=4.0,
                    help="sustained training TFLOP/s of one node (default: a 64-core Zen 4 server, fp32)")
    ap.add_argument("--alpha-us", type=float, default=5.0, help="message latency, microseconds")
    ap.add_argument("--bucket-mb", type=float, default=32.0, help="allreduce bucket (GATEDLM_ALLREDUCE_BUCKET_MB)")
    a = ap.parse_args()

    demo = {"vocab_size": 4096, "d_model": 256, "n_layers": 6, "n_heads": 4, "n_kv_heads": 4, "head_dim": 64,
            "ffn_hidden": 704, "max_seq_len": 256, "gate": {"position": "sdpa"}}
    dense17 = {"vocab_size": 151936, "d_model": 2048, "n_layers": 28, "n_heads": 16, "n_kv_heads": 8,
               "head_dim": 128, "ffn_hidden": 6144, "max_seq_len": 4096, "tie_embeddings": True,
               "gate": {"position": "sdpa"}}
    models = [
        # name, config, sequences per step, sequence length
        ("demo (small preset, G1 gate)", demo, 1024, 256),
        ("1.7B dense (paper, G1 gate)", dense17, 1024, 4096),
    ]
    F = a.node_tflops * 1e12
    alpha = a.alpha_us * 1e-6
    bucket = a.bucket_mb * (1 << 20)
    print(f"Assumptions: {a.node_tflops:g} TFLOP/s sustained per node, latency {a.alpha_us:g} us, "
          f"bucket {a.bucket_mb:g} MiB, no overlap of the allreduce with the backward.\n")
    for name, cfg, seqs, seq in models:
        P = params_of(a.gatedlm, cfg)
        S = 8 * P
        tokens = seqs * seq
        d_attn = cfg["n_heads"] * cfg["head_dim"]
        flops = (6 * P + 12 * cfg["n_layers"] * seq * d_attn) * tokens
        t1 = flops / F
        print(f"**{name}**: {P / 1e6:,.1f} M parameters, gradient buffer S = {S / 1e6:,.1f} MB per step "
              f"(float64), global batch {seqs} x {seq} = {tokens:,} tokens, {flops:.3g} FLOP per step "
              f"({t1:,.2f} s on one node).\n")
        print("| nodes | compute s/step | 25 Gb/s: allreduce s, efficiency | 100 Gb/s | 400 Gb/s |")
        print("|---:|---:|---:|---:|---:|")
        for n in (8, 64, 512):
            tc = t1 / n
            cells = []
            for gb in (25, 100, 400):
                tar = allreduce_s(n, S, gb * GBIT, alpha, bucket)
                cells.append(f"{tar:.3g} s, {100 * tc / (tc + tar):.0f} %")
            print(f"| {n} | {tc:.3g} | " + " | ".join(cells) + " |")
        print()


if __name__ == "__main__":
    main()
