#!/usr/bin/python3
"""Time to first token per turn of a 5-turn chat, with and without serve's prefix cache
(issue 40), next to llama.cpp prefilling the same prompt lengths.

The model: bench/configs/qwen35_hybrid_150m.json (Qwen3.5's shape: 3 Gated DeltaNet layers
per gated softmax layer, random weights from `gatedlm init`), served with the byte tokenizer
(one token per byte). The conversation: a system prompt, then five turns, each appending a
user message to the history and resending all of it to /v1/completions with max_tokens 1,
so the answer's time is the time to the first token; a fixed assistant reply of about
--reply-bytes is then appended (the client's copy of the answer, as chat clients resend it).
Two servers, --prefix-cache-bytes 0 and the default budget, run the same conversation one
after the other; each turn's time is the median of --reps conversations (each one on a new
server, so that no turn finds another run's prefix), and usage.prompt_tokens_details.
cached_tokens is reported.

llama.cpp: the checkpoint exported to GGUF F32 (`gatedlm export --format gguf`, as
`qwen35`), timed by build/tests/llama_probe --bench (npm's @node-llama-cpp/linux-x64
prebuilt CPU libraries, as bench/compare_generate.py): each turn's whole prompt prefilled
from empty memory plus one decode step, which is what llama.cpp does on every turn of a
hybrid whose recurrent state it cannot roll back (llama.cpp #21831). It is skipped, with the
reason, when the probe or the libraries are missing.

Usage: /usr/bin/python3 bench/prefix_cache_ttft.py [--gatedlm build/gatedlm] [--threads 2]
          [--reps 3] [--system-bytes 200] [--turn-bytes 150] [--reply-bytes 150] [--no-llama]
Prints a markdown table (bench/RESULTS.md takes it with the command and `lscpu` model)."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "serve"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))
sys.dont_write_bytecode = True

SENTENCES = ["The harbour wakes before the town does, and the gulls know it. ",
             "Nets are mended on the quay while the tide turns under the hulls. ",
             "A keeper climbs the lighthouse stairs with oil and a cloth for the lens. ",
             "Rain comes in sideways from the west and nobody minds it much. "]


def text_of(nbytes, seed):
    """About nbytes of plain English (ASCII: one byte-tokenizer token per byte)."""
    out, i = "", seed
    while len(out) < nbytes:
        out += SENTENCES[i % len(SENTENCES)]
        i += 1
    return out[:nbytes]


def turns(a):
    """The five prompts of the conversation (each the whole history so far)."""
    history = "System: " + text_of(a.system_bytes, 0) + "\n"
    prompts = []
    for t in range(5):
        history += "User: " + text_of(a.turn_bytes, t + 1) + "\nAssistant:"
        prompts.append(history)
        history += " " + text_of(a.reply_bytes, t + 7) + "\n"
    return prompts


def serve_conversation(a, ckpt, work, budget):
    """Per turn (seconds to the answer of max_tokens 1, cached_tokens, prompt_tokens)."""
    from test_server import Server
    os.environ["OMP_NUM_THREADS"] = str(a.threads)
    s = Server(a.gatedlm, ckpt, work, "--max-batch", "1", "--prefix-cache-bytes", str(budget))
    try:
        rows = []
        for prompt in turns(a):
            t0 = time.perf_counter()
            st, j, _ = s.request("POST", "/v1/completions", {"prompt": prompt, "max_tokens": 1, "temperature": 0})
            dt = time.perf_counter() - t0
            if st != 200:
                sys.exit(f"serve answered {st}: {j}")
            u = j["usage"]
            rows.append((dt, u["prompt_tokens_details"]["cached_tokens"], u["prompt_tokens"]))
        return rows
    finally:
        s.stop()


def llama_times(a, ckpt, lengths):
    """Seconds llama.cpp takes to prefill each length and decode one token, or (None, why)."""
    from test_gguf_llama import byte_level_tokenizer, fetch_llama_libs
    libdir, why = fetch_llama_libs()
    if libdir is None or not os.path.exists(a.llama_probe):
        return None, why or f"{a.llama_probe} is missing: build the project first"
    vocab_file = os.path.join(ckpt, "tokenizer.json")  # llama.cpp loads no model without a vocabulary
    if not os.path.exists(vocab_file):
        with open(vocab_file, "w") as f:
            json.dump(byte_level_tokenizer(json.load(open(os.path.join(ckpt, "config.json")))["vocab_size"]), f)
    gguf = ckpt + "_gguf_f32"
    if not os.path.exists(os.path.join(gguf, "model.gguf")):
        subprocess.run([a.gatedlm, "export", ckpt, "--format", "gguf", "--dtype", "f32", "--out", gguf], check=True,
                       stdout=subprocess.DEVNULL)
    out = []
    for n in lengths:
        p = subprocess.run([a.llama_probe, "--bench", libdir, os.path.join(gguf, "model.gguf"), str(a.threads), str(n),
                            "1", str(a.reps)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if p.returncode:
            return None, "llama_probe --bench failed: " + p.stderr[-500:]
        r = json.loads(p.stdout.strip().splitlines()[-1])
        out.append(n / r["prefill_tokens_per_s"] + 1 / r["decode_tokens_per_s"])
    return out, None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gatedlm", default=os.path.join(HERE, "..", "build", "gatedlm"))
    ap.add_argument("--config", default=os.path.join(HERE, "configs", "qwen35_hybrid_150m.json"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--system-bytes", type=int, default=200)
    ap.add_argument("--turn-bytes", type=int, default=150)
    ap.add_argument("--reply-bytes", type=int, default=150)
    ap.add_argument("--budget", type=int, default=1 << 30, help="--prefix-cache-bytes of the cached server")
    ap.add_argument("--llama-probe", default=os.path.join(HERE, "..", "build", "tests", "llama_probe"))
    ap.add_argument("--no-llama", action="store_true")
    ap.add_argument("--workdir", help="keep the checkpoint here (default: a temporary directory)")
    a = ap.parse_args()
    a.gatedlm = os.path.abspath(a.gatedlm)
    work = a.workdir or tempfile.mkdtemp(prefix="gatedlm_ttft_")
    ckpt = os.path.join(work, os.path.splitext(os.path.basename(a.config))[0])
    if not os.path.exists(os.path.join(ckpt, "model.safetensors")):
        subprocess.run([a.gatedlm, "init", "--config", a.config, "--out", ckpt, "--seed", "1", "--force"], check=True,
                       stdout=subprocess.DEVNULL)
    runs = {0: [], a.budget: []}
    for _ in range(a.reps):  # alternated, so that drift on a shared host hits both alike
        for budget in runs:
            runs[budget].append(serve_conversation(a, ckpt, work, budget))
    plain, cached = ([statistics.median(r[t][0] for r in runs[b]) for t in range(5)] for b in (0, a.budget))
    reuse = [runs[a.budget][0][t][1] for t in range(5)]
    lengths = [runs[0][0][t][2] for t in range(5)]
    llama, why = (None, "--no-llama") if a.no_llama else llama_times(a, ckpt, lengths)
    print(f"# Time to first token, 5-turn chat: {os.path.basename(a.config)}, {a.threads} threads, "
          f"median of {a.reps}\n")
    print("| turn | prompt tokens | cached tokens | no cache (s) | prefix cache (s) | speed-up | llama.cpp F32, "
          "whole prompt (s) |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for t in range(5):
        ll = f"{llama[t]:.2f}" if llama else "-"
        print(f"| {t + 1} | {lengths[t]} | {reuse[t]} | {plain[t]:.2f} | {cached[t]:.2f} | "
              f"{plain[t] / cached[t]:.2f}x | {ll} |")
    print(f"\nsum over the turns: no cache {sum(plain):.2f} s, prefix cache {sum(cached):.2f} s"
          + (f", llama.cpp {sum(llama):.2f} s" if llama else f"; llama.cpp not run ({why})"))


if __name__ == "__main__":
    main()
