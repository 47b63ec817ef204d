#!/usr/bin/python3
"""`gatedlm serve --prefix-cache-bytes` (issue 40): a multi-turn conversation through the
prefix cache gives the same tokens as without it, under continuous batching.

For a dense and a hybrid (Gated DeltaNet, Qwen3.5's layer pattern) random checkpoint, and
the dense one again with --kv-type f16 (rows kept and restored as F16), two servers run side
by side, one with --prefix-cache-bytes 0 and one with a cache. Three
conversations at once (--max-batch 4) each take five turns; every turn resends the whole
history (the earlier prompts and answers) plus a new user line, as chat clients do, with
greedy decoding in one conversation and seeded sampling in the others. Checked: every
answer is the same text on both servers, the cached server's usage reports
prompt_tokens_details.cached_tokens > 0 from the second turn on (at least 64 for the
hybrid, whose snapshots sit at multiples of 64; a first turn may reuse the start another
conversation shares) and the uncached server's reports 0, and the
startup line names the cache and the KV rows' type, and /health the type, the cache's entries, bytes (within the budget) and the
tokens reused. A tiny budget keeps the server correct (entries evicted) and is kept, and a
negative budget is refused.

Usage: /usr/bin/python3 tests/serve/test_prefix_cache.py --gatedlm build/gatedlm
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_server import FAILURES, Server, check  # noqa: E402

BASE = dict(vocab_size=258, d_model=64, n_heads=4, n_kv_heads=2, head_dim=16, ffn_hidden=128, max_seq_len=4096, init_std=0.3,
            gate={"position": "sdpa"})
DENSE = dict(BASE, n_layers=2)
HYBRID = dict(BASE, n_layers=4, rope_dims=4, norm_zero_centered=True, full_attention_interval=4,
              linear_attention={"n_k_heads": 2, "n_v_heads": 4, "k_head_dim": 16, "v_head_dim": 16,
                                "conv_kernel": 4})
USER_LINES = ["Tell me about the sea and the ships that sail on it, please.",
              "And what about the lighthouse keepers?",
              "Why do gulls follow the fishing boats home?",
              "Summarise all of that in one line.",
              "Thank you. One more question: what is a harbour?"]


def conversation(server, k, out):
    """Five turns of conversation k; out[k] gets (answer, cached_tokens, prompt_tokens) per turn."""
    history = f"System: conversation {k}.\n"
    turns = []
    for i, line in enumerate(USER_LINES):
        history += f"User: {line}\nAssistant:"
        body = {"prompt": history, "max_tokens": 24, "seed": 100 + k,
                "temperature": 0.0 if k == 0 else 0.9}
        st, j, _ = server.request("POST", "/v1/completions", body)
        if st != 200:
            turns.append((f"status {st}: {j}", -1, -1))
            break
        text = j["choices"][0]["text"]
        usage = j["usage"]
        turns.append((text, usage["prompt_tokens_details"]["cached_tokens"], usage["prompt_tokens"]))
        history += text + "\n"
    out[k] = turns


def run_conversations(server, count=3):
    out = [None] * count
    threads = [threading.Thread(target=conversation, args=(server, k, out)) for k in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    return out


def check_model(binary, name, config, work, kv_type="f32"):
    cfg = os.path.join(work, f"{name}.json")
    with open(cfg, "w") as f:
        json.dump(config, f)
    ckpt = os.path.join(work, name)
    if not os.path.exists(os.path.join(ckpt, "model.safetensors")):
        subprocess.run([binary, "init", "--config", cfg, "--out", ckpt, "--seed", "5"], check=True,
                       stdout=subprocess.DEVNULL)
    name = f"{name} ({kv_type} cache)"
    plain = Server(binary, ckpt, work, "--max-batch", "4", "--prefix-cache-bytes", "0", "--kv-type", kv_type)
    cached = Server(binary, ckpt, work, "--max-batch", "4", "--prefix-cache-bytes", str(64 << 20),
                    "--kv-type", kv_type)
    try:
        without, with_cache = run_conversations(plain), run_conversations(cached)
        startup = open(cached.log_path).read()
        _, plain_health, _ = plain.request("GET", "/health")
        _, health, _ = cached.request("GET", "/health")
    finally:
        plain.stop()
        cached.stop()
    check("prefix cache 67108864 bytes" in startup and f"kv cache {kv_type}" in startup,
          f"{name}: the startup line names the cache's budget and the KV rows' type")
    check(health.get("kv_type") == kv_type, f"{name}: /health names the KV rows' type")
    pc = health.get("prefix_cache", {})
    reused = sum(t[1] for c in with_cache for t in c)
    check("prefix_cache" not in plain_health and pc.get("budget_bytes") == 64 << 20 and pc.get("entries", 0) >= 1
          and 0 < pc.get("bytes", 0) <= 64 << 20 and pc.get("reused_tokens") == reused,
          f"{name}: /health shows the cache (entries, bytes within the budget, {reused} reused tokens): {pc}")
    for k in range(len(without)):
        a, b = without[k], with_cache[k]
        check([t[0] for t in a] == [t[0] for t in b],
              f"{name}, conversation {k}: the same five answers with and without the cache")
        check(all(t[1] == 0 for t in a), f"{name}, conversation {k}: no cached tokens without the cache")
        least = 64 if name.startswith("hybrid") else 1
        reused = [t[1] for t in b]
        check(b[0][1] < b[0][2] and all(least <= c < p for _, c, p in b[1:]),
              f"{name}, conversation {k}: cached_tokens from the second turn on ({reused} of "
              f"{[t[2] for t in b]} prompt tokens)")
        if [t[0] for t in a] != [t[0] for t in b]:
            print(f"  without: {[t[0] for t in a]}\n  with:    {[t[0] for t in b]}")


def check_small_budget(binary, work):
    """A budget that holds about one conversation: entries are evicted, answers unchanged."""
    ckpt = os.path.join(work, "dense")
    plain = Server(binary, ckpt, work, "--max-batch", "4", "--prefix-cache-bytes", "0")
    small = Server(binary, ckpt, work, "--max-batch", "4", "--prefix-cache-bytes", "200000")
    try:
        a, b = run_conversations(plain), run_conversations(small)
        _, health, _ = small.request("GET", "/health")
    finally:
        plain.stop()
        small.stop()
    check([[t[0] for t in c] for c in a] == [[t[0] for t in c] for c in b],
          "a 200 kB budget (evicting): the same answers as without the cache")
    pc = health.get("prefix_cache", {})
    check(0 < pc.get("bytes", 0) <= 200000 and pc.get("reused_tokens", 0) > 0,
          f"a 200 kB budget: the cache stays within it and is still used ({pc})")
    p = subprocess.run([binary, "serve", "--checkpoint", ckpt, "--tokenizer", "byte", "--port", "0",
                        "--prefix-cache-bytes", "-1"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    check(p.returncode != 0 and "--prefix-cache-bytes" in p.stdout.decode(), "--prefix-cache-bytes -1 is refused")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gatedlm", required=True)
    args = ap.parse_args()
    binary = os.path.abspath(args.gatedlm)
    work = tempfile.mkdtemp(prefix="gatedlm_prefix_")
    try:
        check_model(binary, "dense", DENSE, work)
        check_model(binary, "hybrid", HYBRID, work)
        # F16 rows: restored as stored, the answers those of the same f16 server without a cache.
        check_model(binary, "dense", DENSE, work, "f16")
        check_small_budget(binary, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{len(FAILURES)} failed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
