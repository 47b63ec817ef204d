#!/usr/bin/python3
"""Quantised weights (issue 26): accuracy and decode speed of gatedlm's F32 / BF16 / Q8_0 /
Q4_0 checkpoints against llama.cpp on GGUF files of the same weights, in one run.

Accuracy (--ppl-checkpoint CK, an ungated trained checkpoint, e.g. the demo's baseline):
  the held-out text (--ppl-text) is tokenised with --ppl-tokenizer and cut into --ppl-windows
  windows of --ppl-len tokens; gatedlm scores them (`gatedlm score`, F32 checkpoint and
  `gatedlm quantize` of it, and the GGUF file itself), llama.cpp runs the same windows on
  `gatedlm export --format gguf --dtype` files of the same checkpoint (tests/llama/llama_probe prints its logits) and the
  perplexity is computed here from its logits. The GGUF needs a vocabulary to load: a
  byte-level tokenizer.json of the model's vocab_size stands in (ids go in directly).
Greedy continuation (--greedy-checkpoints CK1,CK2, trained checkpoints, e.g. a dense and a
  hybrid model): each type's GGUF file is written by llama.cpp's own quantiser
  (tests/llama/llama_requantize, --llama-requantize) from gatedlm's F32 export (gatedlm's own
  export where llama.cpp has no file type of that name); `gatedlm generate --temperature 0` and
  llama_probe's greedy decode continue each --greedy-prompt on that same file, and the two
  continuations are compared token by token (the first --greedy-tokens tokens, or up to an EOS);
  where they part, llama.cpp's gap between its top two logits there is printed beside the
  largest difference between the two engines' logits (a near tie, or not); and for every prompt
  the largest logit difference over all its steps (the prompt and llama.cpp's continuation,
  teacher-forced in both engines).
Speed (--shapes): a random model of each config (`gatedlm init --seed 1`), quantised and
  exported per type; batch-1 decode of gatedlm (`bench generate --checkpoint`) and llama.cpp
  (`llama_probe --bench`) alternated in --pairs pairs (median ratio, as compare_generate.py),
  gatedlm's batch 8 in each pair too (median of its ratios to the pair's batch 1), and
  tokens/s against the memory-bandwidth bound (weight bytes read per token / the read bandwidth
  of --threads readers at once, as `gatedlm bench bandwidth`: each batch-1 run measures it just
  before it decodes, `bench generate`'s decode_read_share; the median of the pairs' shares).
Instruction sets: llama.cpp loads the best of its CPU variants for this CPU, or with
  --llama-cpu-variant NAME that one alone (haswell: AVX2 without VNNI, as on a Zen 3; alderlake:
  AVX2 with AVX-VNNI); gatedlm takes its environment, so `GATEDLM_KERNELS=avx2 GATEDLM_VNNI=0
  ONEDNN_MAX_CPU_ISA=AVX2` with --llama-cpu-variant haswell measures both engines as an AVX2-only
  CPU runs them. The report's header names what each engine ran with.

Usage: /usr/bin/python3 bench/compare_quant.py --gatedlm build/gatedlm --llama-probe build/tests/llama_probe
          [--threads 2] [--shapes bench/configs/qwen3_100m.json,...] [--types f32,bf16,q8_0,q4_0]
          [--ppl-checkpoint CK --ppl-text FILE --ppl-tokenizer TOK.model]
          [--greedy-checkpoints CK,... --greedy-prompt TEXT --llama-requantize build/tests/llama_requantize]
          [--llama-cpu-variant haswell] [--workdir DIR]
Prints a markdown report (paste into bench/RESULTS.md with `lscpu`'s model name)."""
import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))
sys.dont_write_bytecode = True

import numpy as np  # noqa: E402

from test_gguf_llama import byte_level_tokenizer, fetch_llama_libs  # noqa: E402
from test_quant_llama import LLAMA_FTYPES, gatedlm_decode_logits, llama_run  # noqa: E402


def run(args, threads=None, capture=True):
    env = dict(os.environ)
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    p = subprocess.run(args, capture_output=capture, text=True, env=env)
    if p.returncode:
        sys.exit(f"{' '.join(args)} failed ({p.returncode}):\n{(p.stderr or '')[-3000:]}")
    return p.stdout


def last_json(text):
    return json.loads(text.strip().splitlines()[-1])


def prepare(a, ck, work, tag, types, vocabulary=True):
    """Quantised checkpoints and GGUF files of checkpoint ck: {type: (checkpoint, gguf)}. With
    `vocabulary`, a checkpoint without a tokenizer.json gets a byte-level one (llama.cpp loads no
    model without a vocabulary); without, the export writes the vocabulary the model was trained
    with."""
    vocab_file = os.path.join(ck, "tokenizer.json")
    if vocabulary and not os.path.exists(vocab_file):
        with open(vocab_file, "w") as f:
            json.dump(byte_level_tokenizer(json.load(open(os.path.join(ck, "config.json")))["vocab_size"]), f)
    out = {}
    for t in types:
        qck = ck if t == "f32" else os.path.join(work, f"{tag}_{t}")
        if t != "f32" and not os.path.exists(os.path.join(qck, "model.safetensors")):
            run([a.gatedlm, "quantize", ck, "--type", t, "--out", qck])
        gguf = os.path.join(work, f"{tag}_gguf_{t}")
        if not os.path.exists(os.path.join(gguf, "model.gguf")):
            run([a.gatedlm, "export", ck, "--format", "gguf", "--dtype", t, "--out", gguf])
        out[t] = (qck, os.path.join(gguf, "model.gguf"))
    return out


def log_softmax_nll(logits, targets):
    m = logits.max(axis=1, keepdims=True)
    lse = m[:, 0] + np.log(np.exp(logits - m).sum(axis=1))
    return lse - logits[np.arange(len(targets)), targets]


def perplexity(a, libdir, work, types):
    """Perplexity of the same windows, gatedlm and llama.cpp, per type."""
    text = open(a.ppl_text, encoding="utf-8").read()
    p = subprocess.run([a.gatedlm, "tokenizer", "encode", "--tokenizer", a.ppl_tokenizer],
                       input=text[: a.ppl_windows * a.ppl_len * 8], capture_output=True, text=True, check=True)
    ids = [int(v) for v in p.stdout.split()]
    windows = [ids[i * a.ppl_len:(i + 1) * a.ppl_len] for i in range(a.ppl_windows)]
    windows = [w for w in windows if len(w) == a.ppl_len]
    tok = os.path.join(work, "ppl_windows.txt")
    with open(tok, "w") as f:
        f.write("".join(" ".join(map(str, w)) + "\n" for w in windows))
    files = prepare(a, a.ppl_checkpoint, work, "ppl", types)
    rows = []
    for t in types:
        ck, gguf = files[t]
        ours = last_json(run([a.gatedlm, "score", "--checkpoint", ck, "--token-ids", tok, "--json"], a.threads))
        # gatedlm on the very file llama.cpp reads (its blocks as loaded, no conversion).
        ours_gguf = last_json(run([a.gatedlm, "score", "--checkpoint", gguf, "--token-ids", tok, "--json"], a.threads))
        nll, count = 0.0, 0
        for w in windows:
            lines = run([a.llama_probe, libdir, gguf, "0"] + list(map(str, w)))
            logits = np.array([[float(v) for v in ln.split()[1:]] for ln in lines.splitlines()
                               if ln.startswith("logits")])
            nll += float(log_softmax_nll(logits[:-1].astype(np.float64), np.array(w[1:])).sum())
            count += len(w) - 1
        rows.append((t, math.exp(ours["mean_loss"]), math.exp(ours_gguf["mean_loss"]), math.exp(nll / count)))
    print(f"\n## Perplexity: {a.ppl_checkpoint} on {len(windows)} windows of {a.ppl_len} tokens of {a.ppl_text}\n")
    print("| weights | gatedlm ppl (its quantised checkpoint) | gatedlm ppl (the GGUF) | llama.cpp ppl (the GGUF) | "
          "difference (GGUF) | vs f32 (llama.cpp) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    base = next((theirs for t, _, _, theirs in rows if t == "f32"), None)
    for t, ours, ours_gguf, theirs in rows:
        vs = f"{100 * (theirs / base - 1):+.2f} %" if base else "-"
        print(f"| {t} | {ours:.3f} | {ours_gguf:.3f} | {theirs:.3f} | {100 * (ours_gguf / theirs - 1):+.2f} % | {vs} |")


def llama_file(a, libdir, work, tag, t, f32_gguf, ours_gguf):
    """The GGUF file of type t that both engines run: llama.cpp's quantiser's rewrite of the F32
    export where it has a file type of that name, else gatedlm's own export."""
    if t == "f32" or t not in LLAMA_FTYPES or not a.llama_requantize:
        return ours_gguf, "gatedlm's export"
    path = os.path.join(work, f"{tag}_llama_{t}.gguf")
    if not os.path.exists(path):
        run([a.llama_requantize, libdir, f32_gguf, path, str(LLAMA_FTYPES[t][0])])
    return path, "llama.cpp's quantiser"


def engine_logits(a, libdir, work, path, tokens):
    """Both engines' logits [len(tokens), V] over `tokens`, teacher-forced: llama.cpp's, gatedlm's."""
    theirs, _ = llama_run(a.llama_probe, libdir, path, tokens)
    return theirs, gatedlm_decode_logits(a.gatedlm, path, tokens, work, "greedy_logits")


def greedy(a, libdir, work, types):
    """The greedy continuation of the same prompts on the same file: gatedlm against llama.cpp."""
    prompts = a.greedy_prompt or ["ROMEO:\n"]
    print(f"\n## Greedy continuations of {len(prompts)} prompts, {a.greedy_tokens} tokens each\n")
    print("| checkpoint | weights | file written by | continuations the same | tokens the same | engines' largest "
          "logit difference, median (max) of prompts | where they part: step, llama.cpp's top-two gap, largest "
          "logit difference between the engines |")
    print("| --- | --- | --- | ---: | ---: | ---: | --- |")
    for i, ck in enumerate(a.greedy_checkpoints.split(",")):
        files = prepare(a, ck, work, f"greedy{i}", sorted(set(types) | {"f32"}), vocabulary=False)
        for t in types:
            path, writer = llama_file(a, libdir, work, f"greedy{i}", t, files["f32"][1], files[t][1])
            whole, same_tokens, compared, parts, spreads = 0, 0, 0, [], []
            for prompt in prompts:
                ours = last_json(run([a.gatedlm, "generate", "--checkpoint", path, "--prompt", prompt, "--temperature",
                                      "0", "--max-tokens", str(a.greedy_tokens), "--json"], a.threads))
                lines = run([a.llama_probe, libdir, path, str(a.greedy_tokens)] + list(map(str, ours["prompt_ids"])))
                theirs = [int(v) for ln in lines.splitlines() if ln.startswith("greedy") for v in ln.split()[1:]]
                n = min(len(ours["ids"]), len(theirs))  # gatedlm stops at an EOS, llama_probe does not
                same = [x == y for x, y in zip(ours["ids"][:n], theirs[:n])]
                # The engines over the prompt and llama.cpp's continuation: their largest
                # difference anywhere (how far apart they are, whether or not a tie turns a
                # step), and where the continuations part (step d: the row before it, on the
                # tokens both chose) llama.cpp's top logit less its second beside their largest
                # difference there (a step is decided only when the first is well above it).
                L, G = engine_logits(a, libdir, work, path, ours["prompt_ids"] + theirs[:n])
                spreads.append(float(np.abs(L - G).max()))
                compared += n
                same_tokens += sum(same)
                if all(same):
                    whole += 1
                    continue
                d = same.index(False)
                row = len(ours["prompt_ids"]) + d - 1
                top = np.sort(L[row])[-2:]
                parts.append(f"{d}, {top[1] - top[0]:.3f}, {np.abs(L[row] - G[row]).max():.3f}")
            spread = f"{statistics.median(spreads):.3f} ({max(spreads):.3f})"
            print(f"| {ck} | {t} | {writer} | {whole}/{len(prompts)} | {same_tokens}/{compared} | {spread} | "
                  f"{'; '.join(parts) or '-'} |")


def llama_cpu_variant_libdir(libdir, variant, work):
    """A directory of llama.cpp's libraries in which libggml-cpu-VARIANT.so is the only CPU
    backend (symbolic links to the package's files), so ggml's loader can pick no other."""
    own = f"libggml-cpu-{variant}.so"
    if not os.path.exists(os.path.join(libdir, own)):
        have = sorted(f[len("libggml-cpu-"):-3] for f in os.listdir(libdir) if f.startswith("libggml-cpu-"))
        sys.exit(f"--llama-cpu-variant {variant}: llama.cpp's package has no {own} (it has {', '.join(have)})")
    out = os.path.join(work, f"llama_{variant}")
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(libdir):
        if (f == own or not f.startswith("libggml-cpu-")) and not os.path.lexists(os.path.join(out, f)):
            os.symlink(os.path.join(libdir, f), os.path.join(out, f))
    return out


def engines_header(a, libdir):
    """What each engine runs with here: gatedlm's kernel set, int8 instruction and oneDNN ISA
    (from `gatedlm --version`, under this environment), llama.cpp's CPU variant."""
    lines = run([a.gatedlm, "--version"]).splitlines()
    ours = "; ".join(ln for ln in lines if ln.startswith(("kernels:", "int8 products:", "matrix products:")))
    theirs = (f"libggml-cpu-{a.llama_cpu_variant}.so alone (--llama-cpu-variant)" if a.llama_cpu_variant
              else "the best of its CPU variants for this CPU (ggml's own choice)")
    return f"gatedlm: {ours}  \nllama.cpp: {theirs}"


def llama_cpu_backend(a, libdir, gguf):
    """The CPU backend llama.cpp loads for this file here, from its log ("loaded CPU backend
    from .../libggml-cpu-zen4.so"): one token of prompt and of decode."""
    p = subprocess.run([a.llama_probe, "--bench", libdir, gguf, "1", "1", "1", "1"], capture_output=True, text=True)
    found = re.search(r"loaded CPU backend from (\S+)", p.stderr)
    return os.path.basename(found.group(1)) if found else "not named in its log"


def speed(a, libdir, work, shape, types):
    name = os.path.splitext(os.path.basename(shape))[0]
    ck = os.path.join(work, name)
    if not os.path.exists(os.path.join(ck, "model.safetensors")):
        run([a.gatedlm, "init", "--config", shape, "--out", ck, "--seed", "1", "--force"])
    files = prepare(a, ck, work, name, types)
    print(f"\nllama.cpp's CPU backend: {llama_cpu_backend(a, libdir, files[types[0]][1])}")
    print(f"\n## Decode speed: {shape}, prompt {a.prompt_tokens}, {a.new_tokens} decode steps, {a.threads} threads, "
          f"median of {a.reps} reps, {a.pairs} alternated runs (gatedlm b1, llama.cpp b1, gatedlm b8); ratios and "
          f"shares are medians of the per-run ones, each share against the read bound its own run measured first "
          f"(`bench generate`'s `decode_read_share`: as `gatedlm bench bandwidth`, 5 passes over 1 GiB; with state: "
          f"the KV rows read besides the weights, `decode_read_share_with_state`); gatedlm's KV cache {a.kv_type}, "
          f"llama.cpp's F16 (its default context)\n")
    print("| weights | MB read / token | gatedlm b1 tok/s | llama.cpp b1 tok/s | ratio (median of pairs) | "
          "gatedlm b8 tok/s | b8 / b1 | read bound GB/s (range) | gatedlm / bound | with state |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for t in types:
        qck, gguf = files[t]
        bench = [a.gatedlm, "bench", "generate", "--checkpoint", qck, "--prompt-tokens", str(a.prompt_tokens),
                 "--new-tokens", str(a.new_tokens), "--reps", str(a.reps), "--kv-type", a.kv_type]
        # Per pair: gatedlm at batch 1, llama.cpp at batch 1, gatedlm at batch 8 (each ratio
        # from runs a minute apart at most: the host's bandwidth moves between minutes).
        runs, reports = [], []
        for _ in range(a.pairs):
            report = last_json(run(bench + ["--batch", "1"], a.threads))
            theirs = last_json(run([a.llama_probe, "--bench", libdir, gguf, str(a.threads), str(a.prompt_tokens),
                                    str(a.new_tokens), str(a.reps)]))["decode_tokens_per_s"]
            b8 = last_json(run(bench + ["--batch", "8"], a.threads))["runs"][0]["decode_tokens_per_s"]
            runs.append((report["runs"][0]["decode_tokens_per_s"], theirs, b8))
            reports.append(report)
        bounds = [r["bandwidth_gbs"] for r in reports]
        share = statistics.median(r["runs"][0]["decode_read_share"] for r in reports)
        with_state = statistics.median(r["runs"][0]["decode_read_share_with_state"] for r in reports)
        print(f"| {t} | {reports[0]['decode_bytes_per_token'] / 1e6:.0f} | "
              f"{statistics.median(o for o, _, _ in runs):.1f} | {statistics.median(r for _, r, _ in runs):.1f} | "
              f"{statistics.median(o / r for o, r, _ in runs):.2f}x | {statistics.median(b for _, _, b in runs):.1f} | "
              f"{statistics.median(b / o for o, _, b in runs):.2f}x | {statistics.median(bounds):.1f} "
              f"({min(bounds):.1f}-{max(bounds):.1f}) | {share:.2f} | {with_state:.2f} |")
        sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gatedlm", default=os.path.join(HERE, "..", "build", "gatedlm"))
    ap.add_argument("--llama-probe", default=os.path.join(HERE, "..", "build", "tests", "llama_probe"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--types", default="f32,bf16,q8_0,q4_0")
    ap.add_argument("--shapes", default=os.path.join(HERE, "configs", "qwen3_100m.json"),
                    help="model configs for the speed table, comma separated (empty: none)")
    ap.add_argument("--prompt-tokens", type=int, default=32)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--kv-type", choices=["f32", "f16"], default="f16",
                    help="gatedlm's KV cache rows (`bench generate --kv-type`); default f16, the type of "
                         "llama.cpp's default context, which the probe uses")
    ap.add_argument("--ppl-checkpoint")
    ap.add_argument("--ppl-text")
    ap.add_argument("--ppl-tokenizer")
    ap.add_argument("--ppl-windows", type=int, default=8)
    ap.add_argument("--ppl-len", type=int, default=256)
    ap.add_argument("--greedy-checkpoints", help="comma-separated trained checkpoints")
    ap.add_argument("--greedy-prompt", action="append", help="a prompt (repeatable; default ROMEO:\\n)")
    ap.add_argument("--greedy-tokens", type=int, default=32)
    ap.add_argument("--llama-requantize", default=os.path.join(HERE, "..", "build", "tests", "llama_requantize"))
    ap.add_argument("--llama-cpu-variant",
                    help="llama.cpp's CPU backend to load alone, e.g. haswell (default: ggml's choice)")
    ap.add_argument("--workdir")
    a = ap.parse_args()
    libdir, why = fetch_llama_libs()
    if libdir is None:
        sys.exit(f"llama.cpp is unavailable: {why}")
    work = a.workdir or tempfile.mkdtemp(prefix="gatedlm_quant_bench_")
    os.makedirs(work, exist_ok=True)
    if a.llama_cpu_variant:
        libdir = llama_cpu_variant_libdir(libdir, a.llama_cpu_variant, work)
    types = a.types.split(",")
    print(f"# Quantised weights: gatedlm vs llama.cpp (node-llama-cpp 3.22.1 prebuilt), {a.threads} threads")
    print(engines_header(a, libdir) + "\n")
    if a.ppl_checkpoint:
        perplexity(a, libdir, work, types)
    if a.greedy_checkpoints:
        greedy(a, libdir, work, types)
    if a.shapes:
        for shape in a.shapes.split(","):
            speed(a, libdir, work, shape, types)


if __name__ == "__main__":
    main()
