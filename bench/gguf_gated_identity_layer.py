#!/usr/bin/python3
"""Can llama.cpp run the paper's gated models (G1 gate, every layer full attention) at all?

`export --format gguf` refuses them: written as llama.cpp's qwen35 (the architecture with
the G1 gate fused into attn_q), llama.cpp aborts in its first llama_decode, because its
hybrid memory reads a recurrent-state input that no layer allocates when no layer is
recurrent (bench/RESULTS.md, "GGUF export of gated models"). This script checks the one
workaround found: append a Gated DeltaNet layer whose every tensor is zero. Its output and
its FFN's are exactly zero, so the residual stream passes through unchanged and the model
computes what gatedlm computes; llama.cpp then has one recurrent layer and runs.

It exports CKPT with GATEDLM_GGUF_FORCE_ALL_FULL_QWEN35=1 (F32), appends the zero layer
(blk.<L>, marked recurrent by qwen35.attention.recurrent_layers), runs llama_probe on it and
compares its prompt logits and greedy continuation with gatedlm's, as
tests/reference/test_gguf_llama.py does.

Usage: /usr/bin/python3 bench/gguf_gated_identity_layer.py --gatedlm build/gatedlm \\
           --probe build/tests/llama_probe --checkpoint CKPT
"""
import argparse
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))
sys.dont_write_bytecode = True
import test_gguf_llama as t  # noqa: E402

SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


class Reader:
    def __init__(self, data):
        self.b, self.at = data, 0

    def get(self, fmt):
        v = struct.unpack_from("<" + fmt, self.b, self.at)[0]
        self.at += struct.calcsize("<" + fmt)
        return v

    def string(self):
        n = self.get("Q")
        self.at += n
        return self.b[self.at - n:self.at].decode()

    def value(self, kind):
        if kind == 8:
            return self.string()
        if kind == 9:
            inner, n = self.get("I"), self.get("Q")
            return inner, [self.value(inner) for _ in range(n)]
        return self.get(SCALAR[kind])


def read_gguf(path):
    """(metadata {key: (type, value)}, [(name, dims innermost first, F32 values)])."""
    r = Reader(open(path, "rb").read())
    assert r.get("I") == 0x46554747 and r.get("I") == 3
    n_tensors, n_kv = r.get("Q"), r.get("Q")
    meta = {}
    for _ in range(n_kv):
        key = r.string()
        kind = r.get("I")
        meta[key] = (kind, r.value(kind))
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        dims = [r.get("Q") for _ in range(r.get("I"))]
        kind, offset = r.get("I"), r.get("Q")
        assert kind == 0, f"{name}: F32 files only"
        infos.append((name, dims, offset))
    base = (r.at + 31) // 32 * 32
    return meta, [(n, d, np.frombuffer(r.b, np.float32, int(np.prod(d)), base + o)) for n, d, o in infos]


def write_gguf(path, meta, tensors):
    out = bytearray()

    def put(fmt, v):
        out.extend(struct.pack("<" + fmt, v))

    def put_string(s):
        put("Q", len(s.encode()))
        out.extend(s.encode())

    def put_value(kind, v):
        if kind == 8:
            put_string(v)
        elif kind == 9:
            put("I", v[0])
            put("Q", len(v[1]))
            for x in v[1]:
                put_value(v[0], x)
        else:
            put(SCALAR[kind], v)

    put("I", 0x46554747), put("I", 3), put("Q", len(tensors)), put("Q", len(meta))
    for key, (kind, v) in meta.items():
        put_string(key), put("I", kind), put_value(kind, v)
    offset = 0
    for name, dims, values in tensors:
        put_string(name), put("I", len(dims))
        for d in dims:
            put("Q", d)
        put("I", 0), put("Q", offset)
        offset += (values.size * 4 + 31) // 32 * 32
    out.extend(b"\0" * (-len(out) % 32))
    for _, _, values in tensors:
        raw = np.ascontiguousarray(values, np.float32).tobytes()
        out.extend(raw + b"\0" * (-len(raw) % 32))
    open(path, "wb").write(out)


def append_zero_linear_layer(meta, tensors, state=16, conv_kernel=4):
    """One Gated DeltaNet layer (1 key head, 1 value head of `state` dims), every tensor zero."""
    arch = meta["general.architecture"][1]
    layers, d = meta[arch + ".block_count"][1], meta[arch + ".embedding_length"][1]
    meta[arch + ".block_count"] = (4, layers + 1)
    for key, v in (("conv_kernel", conv_kernel), ("state_size", state), ("group_count", 1), ("time_step_rank", 1),
                   ("inner_size", state)):
        meta[f"{arch}.ssm.{key}"] = (4, v)
    meta.pop(arch + ".full_attention_interval", None)
    meta[arch + ".attention.recurrent_layers"] = (9, (7, [False] * layers + [True]))
    blk, conv = f"blk.{layers}.", 3 * state
    shapes = {"attn_norm.weight": [d], "post_attention_norm.weight": [d], "attn_qkv.weight": [d, conv],
              "attn_gate.weight": [d, state], "ssm_conv1d.weight": [conv_kernel, conv], "ssm_dt.bias": [1],
              "ssm_a": [1], "ssm_beta.weight": [d, 1], "ssm_alpha.weight": [d, 1], "ssm_norm.weight": [state],
              "ssm_out.weight": [state, d]}
    if arch == "qwen35moe":  # a zero router, zero experts and a zero shared expert
        e, fe = meta[arch + ".expert_count"][1], meta[arch + ".expert_feed_forward_length"][1]
        fs = meta[arch + ".expert_shared_feed_forward_length"][1]
        shapes.update({"ffn_gate_inp.weight": [d, e], "ffn_gate_exps.weight": [d, fe, e], "ffn_up_exps.weight": [d, fe, e],
                       "ffn_down_exps.weight": [fe, d, e], "ffn_gate_inp_shexp.weight": [d],
                       "ffn_gate_shexp.weight": [d, fs], "ffn_up_shexp.weight": [d, fs], "ffn_down_shexp.weight": [fs, d]})
    else:
        ff = meta[arch + ".feed_forward_length"][1]
        shapes.update({"ffn_gate.weight": [d, ff], "ffn_up.weight": [d, ff], "ffn_down.weight": [ff, d]})
    return tensors + [(blk + n, dims, np.zeros(int(np.prod(dims)), np.float32)) for n, dims in shapes.items()]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gatedlm", required=True)
    ap.add_argument("--probe", required=True)
    ap.add_argument("--checkpoint", required=True,
                    help="a G1-gated gatedlm checkpoint (dense or MoE), every layer full attention")
    args = ap.parse_args()
    libdir, why = t.fetch_llama_libs()
    if libdir is None:
        sys.exit(f"llama.cpp's libraries are unavailable ({why})")
    with tempfile.TemporaryDirectory() as work:
        forced = os.path.join(work, "forced")
        subprocess.run([args.gatedlm, "export", args.checkpoint, "--format", "gguf", "--out", forced], check=True,
                       env={**os.environ, "GATEDLM_GGUF_FORCE_ALL_FULL_QWEN35": "1"})
        meta, tensors = read_gguf(os.path.join(forced, "model.gguf"))
        patched = os.path.join(work, "identity_layer.gguf")
        write_gguf(patched, meta, append_zero_linear_layer(meta, tensors))
        prompt = [int(x) for x in np.random.default_rng(3).integers(0, 256, size=12)]
        env = {**os.environ, "LLAMA_PROBE_THREADS": "1"}
        for label, path in (("as exported (all full attention)", os.path.join(forced, "model.gguf")),
                            ("with a zero Gated DeltaNet layer appended", patched)):
            r = subprocess.run([args.probe, libdir, path, str(t.GENERATE)] + list(map(str, prompt)),
                               capture_output=True, text=True, timeout=600, env=env)
            if r.returncode != 0:
                assertion = [ln.split("/")[-1] for ln in r.stderr.splitlines() if "GGML_ASSERT" in ln]
                print(f"{label}: llama.cpp exits {r.returncode}: {assertion[0] if assertion else r.stderr[-300:]}")
                continue
            t.judge(label, "f32", *t.compare(args.gatedlm, args.checkpoint, r.stdout, prompt, work))


if __name__ == "__main__":
    main()
