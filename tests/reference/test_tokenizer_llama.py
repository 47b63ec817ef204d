#!/usr/bin/python3
"""llama.cpp tokenizes as gatedlm does the vocabularies gatedlm's GGUF export writes.

For three tokenizers -- the real Qwen3 tokenizer.json (tokenizer.ggml.pre "qwen2"), the
Qwen3.5 one built from it as test_tokenizer_json.py builds it ("qwen35"), and Qwen3's
vocabulary with GPT-2's ByteLevel split ("gpt-2", which the export wrote as "qwen2" before)
-- a tiny model (`gatedlm init`) carries the tokenizer.json into `gatedlm export --format
gguf`; tests/llama/llama_probe --tokenize runs llama.cpp's own tokenizer (the prebuilt
library of npm's @node-llama-cpp/linux-x64) on the texts of test_tokenizer_json.py
(TinyShakespeare when present, the generated text, the probe strings), and its ids must be
gatedlm's `tokenizer encode` ids. The texts are given in NFC: llama.cpp does not normalise.

A difference is reported with the ids around it. (With the pre-tokenizer named "qwen2", as
the export wrote it for every file, llama.cpp splits the GPT-2 tokenizer's "(hello) IT'S"
otherwise.) Exit status 77 (ctest: skipped), with the reason, without npm, node or the registry.

Usage: /usr/bin/python3 tests/reference/test_tokenizer_llama.py --gatedlm build/gatedlm --probe build/tests/llama_probe
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
from engine_harness import work_directory  # noqa: E402
import test_gguf_llama as gl  # noqa: E402
import test_tokenizer_json as tj  # noqa: E402

SKIP = 77


def export_gguf(gatedlm, tok_dir, work, label):
    """A tiny random model carrying the tokenizer, exported to GGUF; the file's path."""
    with open(os.path.join(tok_dir, "tokenizer.json"), encoding="utf-8") as f:
        j = json.load(f)
    vocab = 1 + max(list(j["model"]["vocab"].values()) + [a["id"] for a in j["added_tokens"]])
    config = os.path.join(work, label + "-config.json")
    with open(config, "w") as f:
        json.dump({"vocab_size": vocab, "d_model": 16, "n_layers": 1, "n_heads": 1, "n_kv_heads": 1, "head_dim": 16,
                   "ffn_hidden": 16, "max_seq_len": 64}, f)
    ck, out = os.path.join(work, label + "-ck"), os.path.join(work, label + "-gguf")
    gl.run([gatedlm, "init", "--config", config, "--out", ck])
    shutil.copy(os.path.join(tok_dir, "tokenizer.json"), os.path.join(ck, "tokenizer.json"))
    gl.run([gatedlm, "export", ck, "--format", "gguf", "--out", out])
    return os.path.join(out, "model.gguf")


def compare(args, libdir, tok_dir, gguf, files, label):
    """The failures' names."""
    failures = []
    for path in files:
        ours = subprocess.run([args.gatedlm, "tokenizer", "encode", "--tokenizer", os.path.join(tok_dir, "tokenizer.json")],
                              stdin=open(path, "rb"), capture_output=True, timeout=600, check=True).stdout.split()
        theirs = gl.run([args.probe, "--tokenize", libdir, gguf, path]).split()
        ours, theirs = [int(x) for x in ours], [int(x) for x in theirs]
        first = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
        same = ours == theirs
        print(f"{label + '/' + os.path.basename(path):34s} {os.path.getsize(path):>9d} bytes {len(ours):>8d} ids  "
              f"same ids as llama.cpp: {'yes' if same else f'NO (first difference at id {first})'}")
        if not same:
            print(f"  gatedlm   {ours[max(0, first - 3):first + 6]}\n  llama.cpp {theirs[max(0, first - 3):first + 6]}")
            failures.append(f"{label}/{os.path.basename(path)}")
    return failures


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gatedlm", required=True)
    ap.add_argument("--probe", required=True)
    ap.add_argument("--workdir")
    args = ap.parse_args(argv)
    libdir, why = gl.fetch_llama_libs()
    if libdir is None:
        print(f"SKIP: llama.cpp's libraries are unavailable ({why})")
        return SKIP
    dirs, why = tj.fetch()
    if dirs is None:
        print(f"SKIP: {why}")
        return SKIP
    qwen3_dir, special = tj.qwen3_tokenizer(dirs)
    work, tmp = work_directory(args.workdir, "gatedlm_tokllama_")
    failures = []
    try:
        files = tj.in_nfc(tj.text_files(work, special), work)  # as gatedlm encodes them
        tokenizers = {"qwen2": qwen3_dir, "qwen35": tj.qwen35_tokenizer(qwen3_dir, os.path.join(work, "qwen35")),
                      "gpt-2": tj.gpt2_tokenizer(qwen3_dir, os.path.join(work, "gpt2"))}
        for pre, tok_dir in tokenizers.items():
            gguf = export_gguf(args.gatedlm, tok_dir, work, pre)
            failures += compare(args, libdir, tok_dir, gguf, files, pre)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
