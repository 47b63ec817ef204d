#!/usr/bin/python3
"""Generation speed of gatedlm against a plain PyTorch KV-cache loop (and llama.cpp, given
a GGUF export), on the same machine and threads, in one run.

The model: bench/configs/qwen3_100m.json (Qwen3-shaped, ungated, about 100M parameters,
random weights from `gatedlm init`). For batch 1 and 8: a prompt of --prompt-tokens
random ids prefilled in one pass, then --new-tokens greedy decode steps.
  - gatedlm: `gatedlm bench generate --checkpoint CK --batch 1,8` (OMP_NUM_THREADS=threads);
  - PyTorch: the loop below (torch.set_num_threads(threads), inference_mode, fp32): the
    same weights read from CK/model.safetensors, a preallocated KV cache, SDPA over it.
    Its logits are checked against the engine's first (`gatedlm debug decode`) so the peer
    computes the same model;
  - llama.cpp: the same checkpoint exported to GGUF F32 by `gatedlm export --format gguf`,
    run by llama.cpp's own library from npm's @node-llama-cpp/linux-x64 prebuilt CPU
    binaries (fetched once into ~/.cache/gatedlm, as tests/reference/test_gguf_llama.py
    does) through `llama_probe --bench` (build/tests/llama_probe; the package ships no
    llama-bench): batch 1, the same prompt length, decode steps, threads and reps,
    alternated with gatedlm's batch 1 in --pairs pairs (the memory bandwidth that batch-1
    decoding needs drifts on a shared host; the ratio is the pairs' median).
Targets (issue 13): decode at batch 1 >= llama.cpp F32; decode >= 3x PyTorch's; aggregate
decode at batch 8 >= 4x batch 1.

Usage: /usr/bin/python3 bench/compare_generate.py [--gatedlm build/gatedlm] [--threads 2]
          [--prompt-tokens 128] [--new-tokens 64] [--reps 3] [--pairs 3] [--llama-probe BIN | --no-llama]
Prints a markdown report (paste into bench/RESULTS.md with the command and `lscpu` model).
Run it on a quiet machine: nothing else may be running."""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

from torch_blas import fair_torch_blas

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))
sys.dont_write_bytecode = True


def torch_peer(ckpt, batch, prompt_tokens, new_tokens, reps, threads, check_ids=None):
    """(prefill_ms, decode_ms_per_step) medians of a plain PyTorch KV-cache loop; with
    check_ids, returns the logits of those ids instead (for the correctness check)."""
    import torch
    import safetensors_io
    torch.set_num_threads(threads)
    cfg = json.load(open(os.path.join(ckpt, "config.json")))
    W = {k: v.to(torch.float32) for k, v in safetensors_io.load(os.path.join(ckpt, "model.safetensors")).items()}
    L, H, KV, D = cfg["n_layers"], cfg["n_heads"], cfg["n_kv_heads"], cfg["head_dim"]
    eps = cfg.get("norm_eps", 1e-6)
    embed = W["model.embed_tokens.weight"]
    head = W.get("lm_head.weight", embed)
    inv = 1.0 / (cfg.get("rope_base", 10000.0) ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    T_max = prompt_tokens + new_tokens + 1 if check_ids is None else check_ids.shape[1]
    ang = torch.arange(T_max, dtype=torch.float64)[:, None] * inv[None, :]
    cos, sin = torch.cos(ang).float(), torch.sin(ang).float()

    def norm(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w

    def rope(x, p0):  # x [B, T, h, D]
        T = x.shape[1]
        c, s = cos[p0:p0 + T][None, :, None, :], sin[p0:p0 + T][None, :, None, :]
        x1, x2 = x[..., :D // 2], x[..., D // 2:]
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1)

    def forward(ids, kc, vc, p0):
        B, T = ids.shape
        x = embed[ids]
        for l in range(L):
            p = f"model.layers.{l}."
            h = norm(x, W[p + "input_layernorm.weight"])
            q = (h @ W[p + "self_attn.q_proj.weight"].T).view(B, T, H, D)
            k = (h @ W[p + "self_attn.k_proj.weight"].T).view(B, T, KV, D)
            v = (h @ W[p + "self_attn.v_proj.weight"].T).view(B, T, KV, D)
            q = rope(norm(q, W[p + "self_attn.q_norm.weight"]), p0)
            k = rope(norm(k, W[p + "self_attn.k_norm.weight"]), p0)
            kc[l][:, p0:p0 + T] = k
            vc[l][:, p0:p0 + T] = v
            # GQA as Hugging Face's repeat_kv: a broadcast view, copied once by reshape
            # (repeat_interleave is several times slower in this torch).
            K = kc[l][:, :p0 + T, :, None].expand(B, p0 + T, KV, H // KV, D).reshape(B, p0 + T, H, D).transpose(1, 2)
            V = vc[l][:, :p0 + T, :, None].expand(B, p0 + T, KV, H // KV, D).reshape(B, p0 + T, H, D).transpose(1, 2)
            y = torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), K, V, is_causal=T > 1) \
                if hasattr(torch.nn.functional, "scaled_dot_product_attention") else None
            if y is None:  # torch < 2.0: the same attention written out
                s = (q.transpose(1, 2) @ K.transpose(-1, -2)) / math.sqrt(D)
                if T > 1:
                    mask = torch.ones(T, p0 + T, dtype=torch.bool).tril(p0)
                    s = s.masked_fill(~mask, float("-inf"))
                y = torch.softmax(s, -1) @ V
            x = x + y.transpose(1, 2).reshape(B, T, H * D) @ W[p + "self_attn.o_proj.weight"].T
            h = norm(x, W[p + "post_attention_layernorm.weight"])
            f = torch.nn.functional.silu(h @ W[p + "mlp.gate_proj.weight"].T) * (h @ W[p + "mlp.up_proj.weight"].T)
            x = x + f @ W[p + "mlp.down_proj.weight"].T
        return norm(x[:, -1] if check_ids is None else x, W["model.norm.weight"]) @ head.T

    with torch.inference_mode():
        def cache(B):
            return ([torch.zeros(B, T_max, KV, D) for _ in range(L)], [torch.zeros(B, T_max, KV, D) for _ in range(L)])
        if check_ids is not None:
            kc, vc = cache(check_ids.shape[0])
            return forward(check_ids, kc, vc, 0)
        g = torch.Generator().manual_seed(1)
        ids = torch.randint(0, cfg["vocab_size"], (batch, prompt_tokens), generator=g)
        pre, dec = [], []
        for rep in range(reps + 1):
            kc, vc = cache(batch)
            t0 = time.perf_counter()
            logits = forward(ids, kc, vc, 0)
            t1 = time.perf_counter()
            for s in range(new_tokens):
                nxt = logits.argmax(-1, keepdim=True)
                logits = forward(nxt, kc, vc, prompt_tokens + s)
            t2 = time.perf_counter()
            if rep:
                pre.append((t1 - t0) * 1e3)
                dec.append((t2 - t1) * 1e3 / new_tokens)
        return statistics.median(pre), statistics.median(dec)


def run_json(cmd, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if p.returncode:
        sys.exit(f"failed: {' '.join(cmd)}\n{p.stderr}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def check_torch_peer(a, ck, work):
    """The peer computes the same model: its logits against the engine's on a short
    sequence (relative error), or exit."""
    import torch
    ids = torch.randint(0, 32000, (1, 9), generator=torch.Generator().manual_seed(3))
    tok = os.path.join(work, "check_tokens.txt")
    open(tok, "w").write(" ".join(map(str, ids[0].tolist())) + "\n")
    out = os.path.join(work, "check.safetensors")
    subprocess.run([a.gatedlm, "debug", "decode", "--checkpoint", ck, "--token-ids", tok, "--out", out], check=True,
                   stdout=subprocess.DEVNULL)
    import safetensors_io
    engine = safetensors_io.load(out)["incremental_logits"].to(torch.float64)
    peer = torch_peer(ck, 1, 0, 0, 0, a.threads, check_ids=ids)[0].to(torch.float64)
    err = float((engine - peer).norm() / peer.norm())
    if err > 1e-4:
        sys.exit(f"the PyTorch peer disagrees with gatedlm (relative error {err:.2e}): not the same model")

    return err


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gatedlm", default=os.path.join(HERE, "..", "build", "gatedlm"))
    ap.add_argument("--config", default=os.path.join(HERE, "configs", "qwen3_100m.json"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--llama-probe", default=os.path.join(HERE, "..", "build", "tests", "llama_probe"),
                    help="tests/llama/llama_probe built by the project (its --bench mode times llama.cpp)")
    ap.add_argument("--no-llama", action="store_true", help="leave llama.cpp out")
    ap.add_argument("--no-torch", action="store_true",
                    help="leave the PyTorch peer out (its loop knows only the all-softmax decoder: use this for "
                         "hybrid configs such as bench/configs/qwen35_hybrid_150m.json)")
    ap.add_argument("--pairs", type=int, default=3,
                    help="batch-1 runs of gatedlm and llama.cpp, alternated (the ratio is their median)")
    ap.add_argument("--kv-type", choices=["f32", "f16"], default="f32",
                    help="gatedlm's KV cache rows (`bench generate --kv-type`): f32 as the PyTorch loop keeps "
                         "them; f16 as llama.cpp's default context does")
    ap.add_argument("--workdir", help="keep the checkpoint here (default: a temporary directory)")
    ap.add_argument("--gguf-arch", default="auto",
                    help="llama.cpp architecture of the GGUF export (qwen3next for a MoE hybrid such as "
                         "bench/configs/qwen3next_hybrid_300m.json)")
    a = ap.parse_args()
    # Before torch is imported here: OpenBLAS reads OPENBLAS_CORETYPE when it loads.
    blas = "" if a.no_torch else fair_torch_blas(a.threads, minimum_gflops=6)
    import torch
    work = a.workdir or tempfile.mkdtemp(prefix="gatedlm_gen_bench_")
    ck = os.path.join(work, os.path.splitext(os.path.basename(a.config))[0])
    if not os.path.exists(os.path.join(ck, "model.safetensors")):
        subprocess.run([a.gatedlm, "init", "--config", a.config, "--out", ck, "--seed", "1", "--force"], check=True,
                       stdout=subprocess.DEVNULL)
    err = None if a.no_torch else check_torch_peer(a, ck, work)
    eng = run_json([a.gatedlm, "bench", "generate", "--checkpoint", ck, "--batch", "1,8", "--prompt-tokens",
                    str(a.prompt_tokens), "--new-tokens", str(a.new_tokens), "--reps", str(a.reps),
                    "--kv-type", a.kv_type], a.threads)
    rows = []
    for run in eng["runs"]:
        b = run["batch"]
        if a.no_torch:
            rows.append((b, run["prefill_tokens_per_s"], run["decode_tokens_per_s"], math.nan, math.nan))
            continue
        pre_ms, dec_ms = torch_peer(ck, b, a.prompt_tokens, a.new_tokens, a.reps, a.threads)
        rows.append((b, run["prefill_tokens_per_s"], run["decode_tokens_per_s"],
                     b * a.prompt_tokens / (pre_ms / 1e3), b / (dec_ms / 1e3)))
    print(f"# Generation speed: gatedlm vs PyTorch {torch.__version__} (KV-cache loop)\n")
    print(f"model {a.config} ({eng['params'] / 1e6:.1f}M parameters, fp32), KV cache {a.kv_type}, prompt {a.prompt_tokens} tokens, "
          f"{a.new_tokens} greedy decode steps, {a.threads} threads, median of {a.reps} reps; "
          + ("PyTorch not run\n" if err is None else f"peer logits agree to {err:.1e}  \n{blas}\n"))
    print("| batch | gatedlm prefill tok/s | gatedlm decode tok/s | PyTorch prefill tok/s | PyTorch decode tok/s | decode ratio |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for b, gp, gd, tp, td in rows:
        print(f"| {b} | {gp:.0f} | {gd:.1f} | {tp:.0f} | {td:.1f} | {gd / td:.2f}x |")
    if len(rows) >= 2:
        print(f"\nbatch {rows[1][0]} aggregate decode / batch {rows[0][0]}: {rows[1][2] / rows[0][2]:.2f}x (target >= 4x)")
    b1 = eng["runs"][0]
    print(f"\nbatch {b1['batch']} decode reads {eng['decode_bytes_per_token'] / 1e6:.0f} MB of weights a step: "
          f"{b1['decode_read_gbs']:.1f} GB/s, {100 * b1['decode_read_share']:.0f} % of the read bound "
          f"{eng['bandwidth_gbs']:.1f} GB/s (`gatedlm bench bandwidth`); with the "
          f"{b1['decode_state_bytes_per_sequence'] / 1e6:.1f} MB of KV cache and recurrent state a step reads, "
          f"{100 * b1['decode_read_share_with_state']:.0f} %")
    if a.no_llama:
        return
    from test_gguf_llama import byte_level_tokenizer, fetch_llama_libs
    libdir, why = fetch_llama_libs()
    if libdir is None or not os.path.exists(a.llama_probe):
        print(f"\nllama.cpp: not run ({why or a.llama_probe + ' is missing: build the project first'})")
        return
    # One GGUF per model and architecture: a workdir reused for another --config or
    # --gguf-arch must not benchmark llama.cpp on the file of the previous one.
    gguf = f"{ck}_gguf_f32_{a.gguf_arch}"
    vocab_file = os.path.join(ck, "tokenizer.json")  # llama.cpp loads no model without a vocabulary
    if not os.path.exists(vocab_file):
        with open(vocab_file, "w") as f:
            json.dump(byte_level_tokenizer(json.load(open(os.path.join(ck, "config.json")))["vocab_size"]), f)
    if not os.path.exists(os.path.join(gguf, "model.gguf")):
        subprocess.run([a.gatedlm, "export", ck, "--format", "gguf", "--dtype", "f32", "--gguf-arch", a.gguf_arch,
                        "--out", gguf], check=True, stdout=subprocess.DEVNULL)
    def llama_once():
        p = subprocess.run([a.llama_probe, "--bench", libdir, os.path.join(gguf, "model.gguf"), str(a.threads),
                            str(a.prompt_tokens), str(a.new_tokens), str(a.reps)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if p.returncode:
            print(f"\nllama.cpp: llama_probe --bench failed:\n{p.stderr[-2000:]}")
            return None
        return json.loads(p.stdout.strip().splitlines()[-1])

    def gatedlm_batch1():
        return run_json([a.gatedlm, "bench", "generate", "--checkpoint", ck, "--batch", "1", "--prompt-tokens",
                         str(a.prompt_tokens), "--new-tokens", str(a.new_tokens), "--reps", str(a.reps),
                         "--kv-type", a.kv_type], a.threads)["runs"][0]

    # Batch-1 decode streams the weights from memory, whose bandwidth on a shared host
    # drifts by a third from one minute to the next: the engines alternate in pairs, and
    # the ratio is each pair's, then their median.
    pairs = []
    ours = {"prefill_tokens_per_s": rows[0][1], "decode_tokens_per_s": rows[0][2]}
    for i in range(a.pairs):
        if i > 0:
            ours = gatedlm_batch1()
        res = llama_once()
        if res is None:
            return
        pairs.append((ours, res))
    print("\n| batch 1, pair | gatedlm prefill | llama.cpp F32 prefill | ratio | gatedlm decode | llama.cpp F32 decode | ratio |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for i, (o, r) in enumerate(pairs, 1):
        print(f"| {i} | {o['prefill_tokens_per_s']:.0f} | {r['prefill_tokens_per_s']:.0f} | "
              f"{o['prefill_tokens_per_s'] / r['prefill_tokens_per_s']:.2f}x | {o['decode_tokens_per_s']:.1f} | "
              f"{r['decode_tokens_per_s']:.1f} | {o['decode_tokens_per_s'] / r['decode_tokens_per_s']:.2f}x |")
    decode = statistics.median(o["decode_tokens_per_s"] / r["decode_tokens_per_s"] for o, r in pairs)
    prefill = statistics.median(o["prefill_tokens_per_s"] / r["prefill_tokens_per_s"] for o, r in pairs)
    print(f"\ngatedlm / llama.cpp at batch 1, median of {len(pairs)} alternated pairs: decode {decode:.2f}x "
          f"(target >= 1x), prefill {prefill:.2f}x")


if __name__ == "__main__":
    main()
