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
    logits at each position, teacher-forced on llama.cpp's tokens) wherever that argmax is
    decided: the engines' logits differ by up to a measured `noise` (llama.cpp's F16 KV cache
    and its rounding of activations), and a random model's top two logits come that close at
    some steps, where either token is right (greedy_agreement says how it is judged).
Then the files people download (issue 36): llama.cpp's own quantiser (llama_model_quantize,
through tests/llama/llama_requantize) rewrites gatedlm's F32 export as Q4_K_M, Q5_K_M, Q6_K,
Q3_K_M, IQ4_XS and Q2_K, for a model whose rows are whole 256-value super-blocks (WIDE) and
for DENSE (64-wide rows: llama.cpp falls back to Q5_0, Q5_1, Q4_0, IQ4_NL and Q8_0 there).
gatedlm runs each file directly (`--checkpoint FILE.gguf`), and
  - its logits at every prompt position match llama.cpp's on the same file within the same
    tolerance (llama.cpp rounds the activations of K-quant products to Q8_K blocks: 256
    values, an fp32 scale, no coarser than Q8_0's: ACT_FACTOR times what gatedlm's own Q8_0
    weights move each model's logits), and, for the types of 4 bits or fewer,
    lie closer to llama.cpp's than gatedlm's F32 model does (the weights told apart);
  - on Q4_K_M its greedy 32-token continuation is llama.cpp's (teacher-forced argmax, judged
    where decided, as for Q8_0);
  - gatedlm's own export of the same file type (`--dtype q4_k_m`, the mixes choosing a type
    per tensor as llama-quantize does; `--dtype q6_k`, ...) holds byte for byte llama.cpp's
    blocks in every tensor both files store in the same type, and for the mixes (Q4_K_M, Q5_K_M,
    Q3_K_M) every tensor has llama.cpp's type, here and for three more shapes whose mixes have
    rules of their own (MIX_SHAPES: a qwen35 hybrid, eight experts, 17 untied layers);
  - the hybrid's Q4_K_M file (llama.cpp's) runs in both: gatedlm four times closer to
    llama.cpp than its F32 model, 24 of 32 greedy tokens the same (check_hybrid_run says why
    no tighter on a random hybrid); and a hybrid trained here on a short text (check_trained_hybrid)
    continues a prompt on llama.cpp's Q4_K_M file exactly as llama.cpp does, all 32 tokens;
  - `gatedlm import` of the Q4_K_M file keeps its types (Q4_K and Q6_K blocks in a quantised
    checkpoint) and decodes exactly the logits of the file run directly.
Exit status 77 (ctest: skipped) with the reason when npm or the registry is unavailable.

Usage: /usr/bin/python3 tests/reference/test_quant_llama.py --gatedlm build/gatedlm --probe build/tests/llama_probe \\
           --requantize build/tests/llama_requantize
"""
import argparse
import json
import os
import shutil
import struct
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


# llama.cpp's LLAMA_FTYPE_MOSTLY_* numbers, and how many bits its weights keep at most.
LLAMA_FTYPES = {"q4_k_m": (15, 5), "q5_k_m": (17, 6), "q6_k": (18, 6), "q3_k_m": (12, 5), "iq4_xs": (30, 4),
                "q2_k": (10, 4)}
WIDE = {**gguf.DENSE, "hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 64}


# ggml type id -> (values per block, bytes per block), for the types these files hold.
GGML_BLOCKS = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34), 10: (256, 84),
               11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 20: (32, 18), 23: (256, 136),
               30: (1, 2)}


# ggml type id -> gatedlm's name, for the block types.
GGML_NAMES = {2: "q4_0", 3: "q4_1", 6: "q5_0", 7: "q5_1", 8: "q8_0", 10: "q2_k", 11: "q3_k", 12: "q4_k", 13: "q5_k",
              14: "q6_k", 20: "iq4_nl", 23: "iq4_xs", 30: "bf16"}


def gguf_tensors(path):
    """{name: (ggml type, the tensor's bytes)} of a GGUF file, from its header and data."""
    with open(path, "rb") as f:
        data = f.read()
    at = 8
    n_tensors, n_kv = struct.unpack_from("<QQ", data, at)
    at += 16

    def string(at):
        (n,) = struct.unpack_from("<Q", data, at)
        return at + 8 + n, data[at + 8:at + 8 + n].decode()

    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def skip(at, t):
        if t == 8:
            return string(at)[0]
        if t == 9:
            et, n = struct.unpack_from("<IQ", data, at)
            at += 12
            for _ in range(n):
                at = skip(at, et)
            return at
        return at + sizes[t]

    alignment = 32
    for _ in range(n_kv):
        at, key = string(at)
        (t,) = struct.unpack_from("<I", data, at)
        if key == "general.alignment":
            (alignment,) = struct.unpack_from("<I", data, at + 4)
        at = skip(at + 4, t)
    table = []
    for _ in range(n_tensors):
        at, name = string(at)
        (nd,) = struct.unpack_from("<I", data, at)
        dims = struct.unpack_from(f"<{nd}Q", data, at + 4)
        at += 4 + 8 * nd
        t, offset = struct.unpack_from("<IQ", data, at)
        at += 12
        table.append((name, t, offset, dims))
    start = (at + alignment - 1) // alignment * alignment
    out = {}
    for name, t, offset, dims in table:
        values, block = GGML_BLOCKS[t]
        count = int(np.prod(dims))
        out[name] = (t, data[start + offset:start + offset + count // values * block])
    return out


# The one type gatedlm's export writes for each recipe (its main type).
# What gatedlm's export writes for each of llama.cpp's file types: the mixes themselves, else the
# one type the file type is named after.
RECIPE_TYPE = {"q4_k_m": "q4_k_m", "q5_k_m": "q5_k_m", "q6_k": "q6_k", "q3_k_m": "q3_k_m", "iq4_xs": "iq4_xs", "q2_k": "q2_k"}
MIXES = ("q4_k_m", "q5_k_m", "q3_k_m")

# gatedlm configs of the shapes whose mixes have rules of their own: a hybrid (attn_qkv
# counted among the attn_v tensors), eight experts (attn_k / attn_v Q8_0, attn_output Q5_K) and
# 17 untied layers (use_more_bits' every third layer, token_embd apart from output).
MIX_SHAPES = {
    "hybrid": ({"vocab_size": 258, "d_model": 256, "n_layers": 8, "n_heads": 4, "n_kv_heads": 1, "head_dim": 64,
                "ffn_hidden": 512, "max_seq_len": 64, "full_attention_interval": 4, "norm_zero_centered": True,
                "gate": {"position": "sdpa", "granularity": "elementwise", "activation": "sigmoid"},
                "linear_attention": {"n_k_heads": 2, "n_v_heads": 4, "k_head_dim": 64, "v_head_dim": 64}}, "qwen35"),
    "experts8": ({"vocab_size": 258, "d_model": 256, "n_layers": 4, "n_heads": 4, "n_kv_heads": 2, "head_dim": 64,
                  "ffn_hidden": 0, "max_seq_len": 64, "moe": {"n_experts": 8, "top_k": 2, "expert_hidden": 256}}, "auto"),
    "untied17": ({"vocab_size": 258, "d_model": 256, "n_layers": 17, "n_heads": 8, "n_kv_heads": 2, "head_dim": 32,
                  "ffn_hidden": 512, "max_seq_len": 64, "tie_embeddings": False}, "auto"),
}


def compare_blocks(ours, theirs):
    """Tensors of the same type in both files, and those whose bytes differ."""
    same_type = [n for n in theirs if n in ours and ours[n][0] == theirs[n][0] and theirs[n][0] != 0]
    return same_type, [n for n in same_type if ours[n][1] != theirs[n][1]]


def type_differences(ours, theirs):
    """Tensors whose ggml type differs between the files (or that one file lacks)."""
    return [n for n in set(ours) | set(theirs) if ours.get(n, (None,))[0] != theirs.get(n, (None,))[0]]


def check_mix_shapes(args, libdir, work, failures):
    """For each of MIX_SHAPES and each mix: llama.cpp's quantiser rewrites gatedlm's F32 export,
    gatedlm exports the mix itself; every tensor must have the same type and bytes."""
    for name, (config, arch) in MIX_SHAPES.items():
        cfg, ck, f32 = (os.path.join(work, f"mix_{name}{tail}") for tail in (".json", "_ck", "_f32"))
        with open(cfg, "w") as f:
            json.dump(config, f)
        gguf.run([args.gatedlm, "init", "--config", cfg, "--out", ck])
        gguf.run([args.gatedlm, "export", ck, "--format", "gguf", "--dtype", "f32", "--gguf-arch", arch, "--out", f32])
        for mix in MIXES:
            theirs_path, mine = os.path.join(work, f"mix_{name}_{mix}.gguf"), os.path.join(work, f"mix_{name}_{mix}")
            gguf.run([args.requantize, libdir, os.path.join(f32, "model.gguf"), theirs_path, str(LLAMA_FTYPES[mix][0])])
            gguf.run([args.gatedlm, "export", ck, "--format", "gguf", "--dtype", mix, "--gguf-arch", arch, "--out", mine])
            ours, theirs = gguf_tensors(os.path.join(mine, "model.gguf")), gguf_tensors(theirs_path)
            differ = type_differences(ours, theirs)
            compared, bytes_differ = compare_blocks(ours, theirs)
            ok = not differ and not bytes_differ
            print(f"{name} {mix}: {len(theirs)} tensors, types differ in {len(differ)} {sorted(differ)[:4]}, "
                  f"bytes in {len(bytes_differ)} of {len(compared)}  {'PASS' if ok else 'FAIL'}")
            if not ok:
                failures.append(f"{name} {mix} types")
            if name == "hybrid" and mix == "q4_k_m":
                check_hybrid_run(args, libdir, work, ck, theirs_path, failures)


def check_hybrid_run(args, libdir, work, ck, path, failures):
    """llama.cpp's Q4_K_M file of the random hybrid, run by both. Its F32 file agrees to 1e-4
    (test_gguf_llama.py), but this random model magnifies every rounding (its Q4_K_M weights
    move its logits by ~70 %), and llama.cpp rounds the activations of every K-quant product
    to Q8_K (256 values to one scale): measured 0.13 rel L2 against gatedlm's fp32
    activations on the same blocks, 27 of 32 greedy tokens the same. Asserted: gatedlm lies
    four times closer to llama.cpp than the F32 model does, and agrees on 24 of the 32
    greedy tokens (teacher-forced). The exact continuation needs a trained hybrid (issue 36)."""
    prompt = [int(t) for t in np.random.default_rng(5).integers(0, 256, size=12)]
    ours_f32 = gatedlm_decode_logits(args.gatedlm, ck, prompt, work, "hybrid_f32")
    llama_logits, greedy = llama_run(args.probe, libdir, path, prompt)
    full = prompt + greedy
    ours = gatedlm_decode_logits(args.gatedlm, path, full, work, "hybrid_q4_k_m")
    err, scale = rel_l2(llama_logits, ours[:len(prompt)]), rel_l2(llama_logits, ours_f32)
    ours_greedy = [int(np.argmax(ours[t])) for t in range(len(prompt) - 1, len(full) - 1)]
    agree = sum(a == b for a, b in zip(ours_greedy, greedy))
    ok = err < scale / 4 and agree >= 24 and len(greedy) == GENERATE
    print(f"hybrid q4_k_m (llama.cpp's file): prompt logits rel L2 {err:.2e} (gatedlm F32 vs this file {scale:.2e}); "
          f"greedy {agree}/{len(greedy)} tokens the same  {'PASS' if ok else 'FAIL'}")
    if not ok:
        print(f"  llama.cpp {greedy}\n  gatedlm   {ours_greedy}")
        failures.append("hybrid q4_k_m run")


# A Qwen3.5-shaped hybrid small enough to train inside the test: 3 Gated DeltaNet layers and a
# G1-gated softmax layer, every row a whole number of 256-value super-blocks (so Q4_K_M has its
# K-quants everywhere), more value heads than key heads as in Qwen3.5.
TRAINED_HYBRID = {"vocab_size": 258, "d_model": 256, "n_layers": 4, "n_heads": 4, "n_kv_heads": 1, "head_dim": 64,
                  "ffn_hidden": 256, "max_seq_len": 256, "rope_dims": 16, "qk_norm": True, "norm_zero_centered": True,
                  "full_attention_interval": 4, "gate": {"position": "sdpa"},
                  "linear_attention": {"n_k_heads": 2, "n_v_heads": 4, "k_head_dim": 64, "v_head_dim": 64}}


def memorable_text():
    """About 4 KB: twelve seeded sentences said over in the same order, so that every next byte
    follows from the ones before: text a small model learns by heart in a hundred steps."""
    words = ("the king and queen of a land far away said to her his good lord my heart is not yours thou art "
             "hence whither goest").split()
    rng = np.random.default_rng(17)
    lines = [" ".join(rng.choice(words, size=int(rng.integers(5, 11)))).capitalize() + "." for _ in range(12)]
    return "\n".join(lines * 8) + "\n"


def check_trained_hybrid(args, libdir, work, failures):
    """Issue 36: on a trained hybrid, gatedlm's greedy continuation on llama.cpp's Q4_K_M file is
    llama.cpp's, all 32 tokens (check_hybrid_run's random hybrid magnifies every rounding; a
    trained one has margins). The hybrid learns memorable_text by heart (`gatedlm train`), its F32
    export is rewritten as Q4_K_M by llama.cpp's quantiser, and both engines continue a line of
    that text greedily: `gatedlm generate --temperature 0` and llama_probe on the same prompt ids."""
    text, cfg = os.path.join(work, "trained_text.txt"), os.path.join(work, "trained_hybrid.json")
    with open(text, "w") as f:
        f.write(memorable_text())
    with open(cfg, "w") as f:
        json.dump(TRAINED_HYBRID, f)
    data, run_dir, f32 = (os.path.join(work, f"trained_{tail}") for tail in ("data", "run", "f32"))
    gguf.run([args.gatedlm, "data", "prepare", "--tokenizer", "byte", "--input", text, "--out", data,
              "--val-fraction", "0.1"])
    gguf.run([args.gatedlm, "train", "--config", cfg, "--data", data, "--out", run_dir, "--steps", "120",
              "--batch-size", "4", "--seq-len", "128", "--lr", "0.003", "--min-lr", "0.0003", "--warmup", "12",
              "--eval-every", "0", "--eval-tokens", "512", "--save-every", "0", "--seed", "1"])
    gguf.run([args.gatedlm, "export", run_dir, "--format", "gguf", "--dtype", "f32", "--out", f32])
    path = os.path.join(work, "trained_hybrid_q4_k_m.gguf")
    gguf.run([args.requantize, libdir, os.path.join(f32, "model.gguf"), path, str(LLAMA_FTYPES["q4_k_m"][0])])
    ours = json.loads(gguf.run([args.gatedlm, "generate", "--checkpoint", path, "--prompt", "The king and",
                                "--temperature", "0", "--max-tokens", str(GENERATE), "--json"]).strip().splitlines()[-1])
    _, theirs = llama_run(args.probe, libdir, path, ours["prompt_ids"])
    ok = ours["ids"] == theirs and len(theirs) == GENERATE and len(set(theirs)) >= 4
    print(f"trained hybrid q4_k_m (llama.cpp's file): greedy {sum(a == b for a, b in zip(ours['ids'], theirs))}/"
          f"{len(theirs)} tokens the same, {ours['text']!r}  {'PASS' if ok else 'FAIL'}")
    if not ok:
        print(f"  llama.cpp {theirs}\n  gatedlm   {ours['ids']}")
        failures.append("trained hybrid q4_k_m greedy")


def check_llama_quantized(args, libdir, work, name, cfg, ftypes, failures):
    """llama.cpp quantises gatedlm's F32 export of `cfg`; both run each file. The tolerance
    is this model's own: ACT_FACTOR times what gatedlm's Q8_0 weights move its logits."""
    src = os.path.join(work, f"{name}_hf")
    hf.write_hf_dir(src, cfg, hf.random_tensors(cfg, seed=11, std=0.15))
    with open(os.path.join(src, "tokenizer.json"), "w") as f:
        json.dump(gguf.byte_level_tokenizer(cfg["vocab_size"]), f)
    ck, f32 = os.path.join(work, f"{name}_f32"), os.path.join(work, f"{name}_gguf_f32")
    gguf.run([args.gatedlm, "import", src, "--out", ck])
    gguf.run([args.gatedlm, "export", ck, "--format", "gguf", "--dtype", "f32", "--out", f32])
    prompt = [int(t) for t in np.random.default_rng(3).integers(0, 256, size=12)]
    ours_f32 = gatedlm_decode_logits(args.gatedlm, ck, prompt, work, f"{name}_f32")
    q8 = os.path.join(work, f"{name}_q8_0")
    gguf.run([args.gatedlm, "quantize", ck, "--type", "q8_0", "--out", q8])
    tol = ACT_FACTOR * rel_l2(gatedlm_decode_logits(args.gatedlm, q8, prompt, work, f"{name}_q8_0"), ours_f32)
    for ftype in ftypes:
        number, bits = LLAMA_FTYPES[ftype]
        path = os.path.join(work, f"{name}_{ftype}.gguf")
        gguf.run([args.requantize, libdir, os.path.join(f32, "model.gguf"), path, str(number)])
        llama_logits, greedy = llama_run(args.probe, libdir, path, prompt)
        full = prompt + greedy
        ours = gatedlm_decode_logits(args.gatedlm, path, full, work, f"{name}_{ftype}")
        err, scale = rel_l2(llama_logits, ours[:len(prompt)]), rel_l2(llama_logits, ours_f32)
        ours_greedy = [int(np.argmax(ours[t])) for t in range(len(prompt) - 1, len(full) - 1)]
        same, greedy_words = greedy_verdict(ours, llama_logits, len(prompt), greedy)
        theirs = gguf_tensors(path)
        types = sorted({t for t, _ in theirs.values()})
        mine = os.path.join(work, f"{name}_gatedlm_{ftype}")
        gguf.run([args.gatedlm, "export", ck, "--format", "gguf", "--dtype", RECIPE_TYPE[ftype], "--out", mine])
        ours_file = gguf_tensors(os.path.join(mine, "model.gguf"))
        compared, differ = compare_blocks(ours_file, theirs)
        types_differ = type_differences(ours_file, theirs) if ftype in MIXES else []
        print(f"{name} {ftype}: gatedlm's --dtype {RECIPE_TYPE[ftype]} export and llama.cpp's file share the type of "
              f"{len(compared)} tensors (differ in {len(types_differ)} {types_differ[:3]}); bytes differ in "
              f"{len(differ)} {differ[:3]}")
        kept = ftype != "q4_k_m" or imported_keeps_blocks(args.gatedlm, path, full, ours, work, name)
        ok = (err <= tol and (err < scale or bits > 5) and (same or ftype != "q4_k_m") and compared and not differ
              and not types_differ and kept)
        print(f"{name} {ftype} (llama.cpp's file; ggml types {types}): prompt logits rel L2 {err:.2e} "
              f"(tol {tol:.2e}; gatedlm F32 vs this file {scale:.2e}); {greedy_words}  {'PASS' if ok else 'FAIL'}")
        if not ok:
            print(f"  llama.cpp {greedy}\n  gatedlm   {ours_greedy}")
            failures.append(f"{name} {ftype}")


def imported_keeps_blocks(binary, path, tokens, logits, work, name):
    """`gatedlm import FILE.gguf` keeps the file's types: the checkpoint records them, and it
    decodes exactly the logits of the file run directly."""
    ck = os.path.join(work, f"{name}_imported")
    gguf.run([binary, "import", path, "--out", ck])
    with open(os.path.join(ck, "model.safetensors"), "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))["__metadata__"]
    formats = json.loads(header["gatedlm.tensor_formats"])
    kinds = sorted(set(formats.values()))
    in_file = sorted({GGML_NAMES[t] for t, _ in gguf_tensors(path).values() if t in GGML_NAMES})
    same = np.array_equal(gatedlm_decode_logits(binary, ck, tokens, work, f"{name}_imported"), logits)
    print(f"{name}: import kept {len(formats)} tensors in their blocks ({header['gatedlm.quantized']}: {kinds}; the "
          f"file's block types {in_file}); logits {'identical to' if same else 'DIFFER from'} the file's")
    return same and kinds == in_file


def greedy_agreement(ours, llama_logits, prompt_len, greedy):
    """gatedlm's teacher-forced argmax against llama.cpp's greedy tokens, judged where it is
    decided. The two engines' logits differ by up to `noise` per entry (the largest difference
    over the prompt positions: llama.cpp keeps its KV cache in F16 and rounds the activations of
    quantised products), and a random model's top two logits lie that close at some steps:
    there the argmax may flip with neither engine wrong. So a step where gatedlm's own top two
    are more than 2 * noise apart must agree; the others are counted. Returns (steps that
    agree, steps that disagree though decided, undecided steps, noise)."""
    noise = float(np.max(np.abs(np.asarray(llama_logits) - ours[:prompt_len])))
    agree, wrong, undecided = 0, [], 0
    for i, token in enumerate(greedy):
        row = ours[prompt_len - 1 + i]
        second, first = np.sort(row)[-2:]
        decided = first - second > 2 * noise
        undecided += not decided
        if int(np.argmax(row)) == token:
            agree += 1
        elif decided:
            wrong.append(i)
    return agree, wrong, undecided, noise


def greedy_verdict(ours, llama_logits, prompt_len, greedy):
    """(ok, words): every decided step agrees, at most half the steps are undecided (else the
    check says little; the random wide model has 11 of 32 on Q4_K_M, its logits differing by
    up to 0.27 between the engines), and llama.cpp generated all GENERATE tokens."""
    agree, wrong, undecided, noise = greedy_agreement(ours, llama_logits, prompt_len, greedy)
    ok = not wrong and undecided <= GENERATE // 2 and len(greedy) == GENERATE
    words = (f"greedy {agree}/{len(greedy)} tokens the same, {undecided} steps undecided (top two within 2 x "
             f"{noise:.1e}), {len(wrong)} decided steps differ {wrong[:4]}")
    return ok, words


def rel_l2(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gatedlm", required=True)
    ap.add_argument("--probe", required=True)
    ap.add_argument("--requantize", required=True)
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
            same, greedy_words = greedy_verdict(ours, llama_logits, len(prompt), greedy)
            ok = err <= tol and (err < scale or dtype != "q4_0") and (same or dtype != "q8_0")
            print(f"{dtype}: prompt logits rel L2 {err:.2e} (tol {tol:.2e}; gatedlm F32 vs this file {scale:.2e}); "
                  f"{greedy_words}  {'PASS' if ok else 'FAIL'}")
            print(f"  llama.cpp {greedy}\n  gatedlm   {ours_greedy}")
            if dtype == "q8_0" and len(set(greedy)) < 4:
                print("  the continuation is nearly constant: the check would say little")
                ok = False
            if not ok:
                failures.append(dtype)
        binaries = argparse.Namespace(gatedlm=binary, probe=probe, requantize=os.path.abspath(args.requantize))
        check_llama_quantized(binaries, libdir, work, "wide", WIDE, list(LLAMA_FTYPES), failures)
        check_llama_quantized(binaries, libdir, work, "narrow", gguf.DENSE, ["q4_k_m", "q5_k_m", "iq4_xs", "q2_k"],
                              failures)
        check_mix_shapes(binaries, libdir, work, failures)
        check_trained_hybrid(binaries, libdir, work, failures)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
