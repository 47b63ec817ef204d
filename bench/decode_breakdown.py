#!/usr/bin/python3
"""Where a decode step's time goes (issue 41): `perf record` with DWARF call stacks over
`gatedlm bench generate --checkpoint CK --batch B` (B = --batch, 1 unless given), each sample
put in one class by the frames of its stack, over the decode window only.

Classes (per step, both threads' time summed, and as shares of it):
  products: FFN       the gate/up/down projections (stack under Model::ffn_forward)
  products: attn in   q, k, v and gate projections (AttentionMixer::inputs_forward)
  products: attn out  o_proj (AttentionMixer::outputs_forward)
  products: LM head   the output matrix (a product not under block_forward)
  attention           softmax attention over the KV cache (and the sink/softpick variants)
  norms, elementwise  RMSNorm, RoPE, SwiGLU, the gate's sigmoid, residual adds, copies
  OpenMP barriers     a thread spinning in libgomp: waiting at a region's end or for work
  off CPU             the window's wall time that no sample of that thread covers (asleep in
                      a futex after the spin, or preempted by another process)
  other               anything else (the largest symbols are listed)
The worker thread's samples carry no caller above the OpenMP region, so its product time is
split between the four product classes in the main thread's proportions (said in the report).
The decode window runs from the first to the last main-thread sample under Decoder::step;
with --prompt-tokens 1 the prefill is one step of the same kind.

Needs `perf` (Debian: linux-perf) and kernel.perf_event_paranoid <= 1 (or root).
Usage: /usr/bin/python3 bench/decode_breakdown.py --gatedlm build/gatedlm CK [CK ...]
          [--threads 2] [--batch 1] [--new-tokens 64] [--frequency 499]
Prints a markdown table per checkpoint (paste into bench/RESULTS.md with `lscpu`'s model)."""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile

CLASSES = ["products: FFN", "products: attn in", "products: attn out", "products: LM head", "attention",
           "norms, elementwise", "OpenMP barriers", "off CPU", "other"]
PRODUCT_CLASSES = CLASSES[:4]
# Frames that mark a weight product (innermost kernels and the dispatch above them).
PRODUCT_MARKS = ("product_of", "for_each_row_group", "quant_matmul", "int8_product", "bf16_product", "gemv", "sgemm", "matmul<",
                 "linear_forward", "dnnl", "packed_decode")
ATTENTION_MARKS = ("attention_decode", "Decoder::attend", "softmax_weights", "sink_", "softpick")
ELEMENTWISE_MARKS = ("rmsnorm", "rope", "swiglu", "sigmoid", "add_clipped", "gate_", "memmove", "memcpy", "memset",
                     "residual", "qk_norm", "embedding")


def is_openmp(frame):
    return frame.startswith("0x") or "gomp" in frame.lower() or frame.startswith("[unknown]")


def classify(frames, main_thread):
    """One sample's class from its frames (innermost first)."""
    if not frames:
        return "other"
    inner = frames[0]
    if is_openmp(inner) or "libgomp" in inner:
        return "OpenMP barriers"
    if any(m in f for f in frames for m in ATTENTION_MARKS):
        return "attention"
    if any(m in f for f in frames[:6] for m in PRODUCT_MARKS) or any("with_decode_team" in f for f in frames):
        if not main_thread:
            return "products (worker)"
        if any("ffn_forward" in f or "MoeBlock" in f for f in frames):
            return "products: FFN"
        if any("outputs_forward" in f for f in frames):
            return "products: attn out"
        if any("block_forward" in f for f in frames):
            return "products: attn in"
        return "products: LM head"
    if any(m in f.lower() for f in frames[:4] for m in ELEMENTWISE_MARKS):
        return "norms, elementwise"
    return "other"


def samples(perf_data):
    """(tid, time_s, period_ns, [frames innermost first]) for each sample."""
    out = subprocess.run(["perf", "script", "-i", perf_data, "-F", "tid,time,period,ip,sym"], capture_output=True,
                         text=True, check=True).stdout
    for block in out.split("\n\n"):
        lines = [ln for ln in block.splitlines() if ln.strip()]
        if not lines:
            continue
        head = lines[0].split()
        try:
            tid, time_s, period = int(head[0]), float(head[1].rstrip(":")), int(head[2])
        except (IndexError, ValueError):
            continue
        frames = []
        for ln in lines[1:]:
            parts = ln.strip().split(None, 1)
            frames.append(parts[1] if len(parts) > 1 else parts[0])
        yield tid, time_s, period, frames


def measure(a, ck, work):
    data = os.path.join(work, os.path.basename(ck.rstrip("/")) + ".perf")
    env = {**os.environ, "OMP_NUM_THREADS": str(a.threads)}
    bench = subprocess.run(["perf", "record", "-q", "-F", str(a.frequency), "--call-graph", "dwarf,16384", "-o", data,
                            a.gatedlm, "bench", "generate", "--checkpoint", ck, "--batch", str(a.batch), "--prompt-tokens", "1",
                            "--new-tokens", str(a.new_tokens), "--reps", "1", "--bandwidth-gbs", "1"],
                           capture_output=True, text=True, env=env)
    if bench.returncode:
        sys.exit(f"perf record / bench generate failed on {ck}:\n{bench.stderr[-2000:]}")
    result = json.loads(bench.stdout.strip().splitlines()[-1])
    all_samples = list(samples(data))
    main_tid = collections.Counter(t for t, _, _, _ in all_samples).most_common(1)[0][0]
    in_decode = [s for t, s, _, f in all_samples if t == main_tid and any("Decoder::step" in x for x in f)]
    start, end = min(in_decode), max(in_decode)
    per_class, per_thread_ns, other_symbols = collections.Counter(), collections.Counter(), collections.Counter()
    for tid, time_s, period, frames in all_samples:
        if not start <= time_s <= end:
            continue
        per_thread_ns[tid] += period
        c = classify(frames, tid == main_tid)
        per_class[c] += period
        if c == "other":
            other_symbols[frames[0][:70] if frames else "?"] += period
    window_ns = (end - start) * 1e9
    per_class["off CPU"] = sum(max(0.0, window_ns - ns) for ns in per_thread_ns.values()) + \
        window_ns * max(0, a.threads - len(per_thread_ns))
    worker = per_class.pop("products (worker)", 0)
    main_products = sum(per_class[c] for c in PRODUCT_CLASSES)
    for c in PRODUCT_CLASSES:
        per_class[c] += worker * per_class[c] / main_products if main_products else 0
    steps = window_ns / 1e6 / result["runs"][0]["decode_ms_per_step"]
    return result, per_class, steps, other_symbols, worker


def report(ck, result, per_class, steps, other_symbols, worker):
    total = sum(per_class[c] for c in CLASSES)
    run = result["runs"][0]
    print(f"\n### {os.path.basename(ck.rstrip('/'))}: {result['decode_bytes_per_token'] / 1e6:.0f} MB read per token, "
          f"{run['decode_ms_per_step']:.1f} ms per step under perf ({steps:.0f} steps in the window)\n")
    print("| class | ms per step (both threads) | share |")
    print("| --- | ---: | ---: |")
    for c in CLASSES:
        print(f"| {c} | {per_class[c] / 1e6 / steps:.2f} | {100 * per_class[c] / total:.1f} % |")
    print(f"\nThe worker thread's products ({100 * worker / total:.1f} % of the time) are split in the main thread's "
          "proportions.")
    if other_symbols:
        print("Largest in other: " + ", ".join(f"{s} ({100 * n / total:.1f} %)" for s, n in other_symbols.most_common(4)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gatedlm", required=True)
    ap.add_argument("checkpoints", nargs="+")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=1, help="sequences decoded together (a step makes this many tokens)")
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--frequency", type=int, default=499)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="gatedlm_breakdown_") as work:
        for ck in a.checkpoints:
            report(ck, *measure(a, ck, work))


if __name__ == "__main__":
    main()
