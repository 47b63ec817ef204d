#!/usr/bin/python3
"""Quantised weights against llama.cpp on the same Q8_0 / Q4_0 weights (issue 26).

A small random Qwen3 model (test_gguf_llama.py's DENSE case, byte-level BPE tokenizer.json)
is imported into gatedlm, then
  - `gatedlm quantize --type q8_0|q4_0` writes gatedlm's inference checkpoint, and
  - `gatedlm export --format gguf --dtype q8_0|q4_0` the GGUF file llama.cpp runs
(both quantise the same tensors with the same ggml reference quantiser, so the weights
are identical). tests/llama/llama_probe feeds a prompt to llama.cpp token by token; gatedlm
decodes the same tokens one at a time over its KV cache (`debug decode --prompt-lengths 1`,
products reading the blocks directly):
  - the logits at every prompt position match within a tolerance that llama.cpp's own
    activation rounding explains: its CPU backend rounds the activations entering every
    Q8_0 / Q4_0 product to Q8_0 blocks (32 values, one fp16 scale), the same relative
    step as rounding the weights to Q8_0. So the logits move by about as much as gatedlm's
    own Q8_0 weights move them from its F32 ones (measured here, on the same prompt); the
    tolerance is ACT_FACTOR (1.5) times that, for Q8_0 and Q4_0 alike (llama.cpp rounds
    the activations to Q8_0 for both). Measured on this model (Zen 4, avx512 set): 1.8e-2
    against llama.cpp for both formats (the same with GATEDLM_KERNELS=generic, whose
    products do not round the activations), 2.5e-2 from gatedlm's own Q8_0 weights; the
    Q4_0 weights move the logits by 0.36 from F32, so the check tells the weights apart
    (asserted: the error must stay below gatedlm F32 against the Q4_0 file);
  - the greedy 32-token continuation of Q8_0 is the one gatedlm predicts (argmax of its
    logits at each position, teacher-forced on llama.cpp's tokens).
Exit status 77 (ctest: skipped) with the reason when npm or the registry is unavailable.

Usage: /usr/bin/python3 tests/reference/test_quant_llama.py --gatedlm build/gatedlm --probe build/tests/llama_probe
"""
import argparse
import json
import os
import shutil
import sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import hf_layout_model as hf  # noqa: E402
import test_gguf_llama as gguf  # noqa: E402
from engine_harness import work_directory  # noqa: E402

ACT_FACTOR = 1.5
GENERATE = gguf.GENERATE


def llama_run(probe, libdir, gguf_file, prompt):
    """llama.cpp's logits [len(prompt), V] and its greedy continuation."""
    lines = gguf.run([probe, libdir, gguf_file, str(GENERATE)] + list(map(str, prompt)))
    rows = [ln.split() for ln in lines.splitlines()]
    logits = np.array([[float(v) for v in r[1:]] for r in rows if r and r[0] == "logits"])
    greedy = [int(v) for r in rows if r and r[0] == "greedy" for v in r[1:]]
    return logits, greedy


def gatedlm_decode_logits(binary, ck, tokens, work, tag):
    """gatedlm's logits [len(tokens), V], decoding one token at a time over its KV cache."""
    ids = os.path.join(work, f"{tag}_tokens.txt")
    with open(ids, "w") as f:
        f.write(" ".join(map(str, tokens)) + "\n")
    dump = os.path.join(work, f"{tag}_decode.safetensors")
    gguf.run([binary, "debug", "decode", "--checkpoint", ck, "--token-ids", ids, "--prompt-lengths", "1", "--out", dump])
    return hf.read_safetensors(dump)["incremental_logits"][1].reshape(len(tokens), -1)


def rel_l2(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gatedlm", required=True)
    ap.add_argument("--probe", required=True)
    ap.add_argument("--workdir")
    args = ap.parse_args(argv)
    libdir, why = gguf.fetch_llama_libs()
    if libdir is None:
        print(f"SKIP: llama.cpp's libraries are unavailable ({why})")
        return gguf.SKIP
    binary, probe = os.path.abspath(args.gatedlm), os.path.abspath(args.probe)
    work, tmp = work_directory(args.workdir, "gatedlm_quant_llama_")
    failures = []
    try:
        cfg = gguf.DENSE
        src = os.path.join(work, "hf")
        hf.write_hf_dir(src, cfg, hf.random_tensors(cfg, seed=11, std=0.15))
        with open(os.path.join(src, "tokenizer.json"), "w") as f:
            json.dump(gguf.byte_level_tokenizer(cfg["vocab_size"]), f)
        ck = os.path.join(work, "f32")
        gguf.run([binary, "import", src, "--out", ck])
        prompt = [int(t) for t in np.random.default_rng(3).integers(0, 256, size=12)]
        ours_f32 = gatedlm_decode_logits(binary, ck, prompt, work, "f32")
        tol = None
        for dtype in ("q8_0", "q4_0"):
            qck, out = os.path.join(work, f"ck_{dtype}"), os.path.join(work, f"gguf_{dtype}")
            gguf.run([binary, "quantize", ck, "--type", dtype, "--out", qck])
            gguf.run([binary, "export", ck, "--format", "gguf", "--dtype", dtype, "--out", out])
            llama_logits, greedy = llama_run(probe, libdir, os.path.join(out, "model.gguf"), prompt)
            full = prompt + greedy
            ours = gatedlm_decode_logits(binary, qck, full, work, dtype)
            err = rel_l2(llama_logits, ours[:len(prompt)])
            scale = rel_l2(llama_logits, ours_f32)
            if dtype == "q8_0":  # what rounding to Q8_0 blocks does to the logits (weights here)
                tol = ACT_FACTOR * rel_l2(ours[:len(prompt)], ours_f32)
            ours_greedy = [int(np.argmax(ours[t])) for t in range(len(prompt) - 1, len(full) - 1)]
            same = ours_greedy == greedy and len(greedy) == GENERATE
            ok = err <= tol and (err < scale or dtype != "q4_0") and (same or dtype != "q8_0")
            print(f"{dtype}: prompt logits rel L2 {err:.2e} (tol {tol:.2e}; gatedlm F32 vs this file {scale:.2e}); "
                  f"greedy {GENERATE} tokens {'identical' if same else 'DIFFER'}  {'PASS' if ok else 'FAIL'}")
            print(f"  llama.cpp {greedy}\n  gatedlm   {ours_greedy}")
            if dtype == "q8_0" and len(set(greedy)) < 4:
                print("  the continuation is nearly constant: the check would say little")
                ok = False
            if not ok:
                failures.append(dtype)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
