#!/usr/bin/env python3
"""Which heads carry the attention sink, and what the gate does to them: activation patching
with gatedlm's hooks on a baseline and a G1-gated model.

    build/gatedlm demo --preset sink --corpus tinyshakespeare.txt --out runs/sink
    PYTHONPATH=build/python /usr/bin/python3 examples/sink_patching.py --demo runs/sink

For every attention head of both models, on windows of the text that start with BOS:
  1. ablate its attention to BOS (hook_pattern: column 0 set to 0 for queries t >= 1, each row
     renormalised over the other keys) and measure the loss change: a head that parks its
     attention on BOS as a no-op (a sink) is hurt when it must attend elsewhere;
  2. patch its attention pattern in from the other model (same architecture) and measure the
     loss change: the baseline's sink pattern in the gated model and the gated model's in
     the baseline;
  3. clamp the gated model's gate open (hook_gate = 1 everywhere) and see what that does to
     F-Attn, the attention of queries t >= 1 on token 0 (docs/metrics.md).
The figure (loss change per head, F-Attn per layer) goes to --out. The windows come from the
validation split of the demo's dataset (DIR/data: the sink preset's synthetic Bigram-Backcopy
chains), or of --data DIR, or from --text FILE. --baseline and --gated name the two runs
(checkpoints or run directories) instead of --demo DIR (DIR/runs/baseline, DIR/runs/gated*).
--tiny runs everything on two random tiny models (the smoke test).
"""
import argparse
import glob
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")  # files only: no display needed
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import gatedlm  # noqa: E402


def dataset_stream(data_dir):
    """The validation split's token ids of a `gatedlm data` directory, BOS and EOS left out."""
    manifest = json.load(open(os.path.join(data_dir, "manifest.json")))
    # val.bin: "GATEDTOK", uint32 version, uint32 bytes per id, uint64 count, then the ids.
    header = np.fromfile(os.path.join(data_dir, "val.bin"), dtype=np.uint8, count=24)
    if bytes(header[:8]) != b"GATEDTOK":
        sys.exit(f"{data_dir}/val.bin: not a gatedlm token shard")
    width, count = int(header[12:16].view(np.uint32)[0]), int(header[16:24].view(np.uint64)[0])
    ids = np.fromfile(os.path.join(data_dir, "val.bin"), dtype=np.uint16 if width == 2 else np.uint32, count=count,
                      offset=24).astype(np.int64)
    return [int(t) for t in ids if t not in (manifest["bos_id"], manifest["eos_id"])]


def bos_windows(tok, stream, count, length):
    """`count` windows of BOS + length-1 tokens from evenly spaced offsets of the stream."""
    if len(stream) < length:
        sys.exit(f"the text has {len(stream)} tokens, fewer than a window of {length}")
    step = max(1, (len(stream) - length) // count)
    return np.array([[tok.bos_id] + stream[i * step:i * step + length - 1] for i in range(count)], dtype=np.int64)


def mean_loss(logits, ids):
    """Mean next-token cross-entropy (nats) of logits [batch, seq, vocab] on ids [batch, seq]."""
    z = logits[:, :-1] - logits[:, :-1].max(axis=-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    return float(-np.take_along_axis(logp, ids[:, 1:, None], axis=-1).mean())


def attention_layers(model):
    return [int(n.split(".")[1]) for n in model.hook_names() if n.endswith("attn.hook_pattern")]


def without_bos(head):
    """A hook_pattern hook: head's queries t >= 1 no longer attend to token 0 (rows renormalised)."""
    def hook(p, name):
        p[:, head, 1:, 0] = 0
        p[:, head, 1:, :] /= np.maximum(p[:, head, 1:, :].sum(axis=-1, keepdims=True), 1e-9)
    return hook


def pattern_of(donor_cache, name, head):
    """A hook_pattern hook: head's pattern replaced by the donor's."""
    def hook(p, _):
        p[:, head] = donor_cache[name][:, head]
    return hook


def head_effects(model, ids, hook_for):
    """{(layer, head): loss change} with hook_for(layer, head) -> (hook name, hook)."""
    base = mean_loss(model.run_with_hooks(ids, {}), ids)
    out = {}
    for layer in attention_layers(model):
        for head in range(model.config["n_heads"]):
            name, hook = hook_for(layer, head)
            out[(layer, head)] = mean_loss(model.run_with_hooks(ids, {name: hook}), ids) - base
    return out


def f_attn(model, ids, hooks=None):
    """F-Attn per attention layer: mean attention of queries t >= 1 on token 0."""
    names = [f"blocks.{l}.attn.hook_pattern" for l in attention_layers(model)]
    _, cache = model.run_with_cache(ids, names=names, hooks=hooks)
    return [float(cache[n][:, :, 1:, 0].mean()) for n in names]


def tiny_models():
    base = dict(vocab_size=258, d_model=32, n_layers=2, n_heads=2, n_kv_heads=2, head_dim=16, ffn_hidden=64,
                max_seq_len=32)
    gated = dict(base, gate={"position": "sdpa", "granularity": "elementwise", "activation": "sigmoid"})
    return gatedlm.Model.init(base, seed=1), gatedlm.Model.init(gated, seed=1)


def load_models(args):
    if args.tiny:
        return tiny_models()
    baseline = args.baseline or (args.demo and os.path.join(args.demo, "runs", "baseline"))
    gated = args.gated or (args.demo and next(iter(sorted(glob.glob(os.path.join(args.demo, "runs", "gated*/")))), None))
    if not baseline or not gated:
        sys.exit("give --demo DIR, or --baseline RUN and --gated RUN (or --tiny)")
    return gatedlm.Model.load(baseline), gatedlm.Model.load(gated)


def plot(effects, fattn, out_dir):
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    for ax, key, title in ((axes[0], "ablate", "Attention to BOS ablated"),
                           (axes[1], "patch", "Pattern patched in from the other model")):
        for i, name in enumerate(("baseline", "gated")):
            heads = sorted(effects[name][key])
            x = np.arange(len(heads)) + 0.4 * i
            ax.bar(x, [effects[name][key][h] for h in heads], width=0.4, label=name)
            ax.set_xticks(np.arange(len(heads)) + 0.2, [f"L{l}H{h}" for l, h in heads], rotation=90)
        ax.set(title=title, ylabel="loss change (nats)")
        ax.legend()
    for label, values in fattn.items():
        axes[2].plot(range(len(values)), values, marker="o", label=label)
    axes[2].set(title="F-Attn per attention layer", xlabel="attention layer", ylabel="attention on token 0")
    axes[2].legend()
    fig.tight_layout()
    path = os.path.join(out_dir, "sink_patching.png")
    fig.savefig(path, dpi=110)
    return path


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--demo", help="a `gatedlm demo` output directory (its runs/baseline and runs/gated)")
    p.add_argument("--baseline", help="the baseline's checkpoint or run directory")
    p.add_argument("--gated", help="the G1-gated model's checkpoint or run directory")
    p.add_argument("--data", help="a `gatedlm data` directory whose validation split gives the windows "
                                  "(default with --demo: DIR/data)")
    p.add_argument("--text", help="a text file to cut windows from instead")
    p.add_argument("--windows", type=int, default=16, help="windows of max_seq_len tokens (default 16)")
    p.add_argument("--out", default="runs/sink-patching", help="directory for the figure")
    p.add_argument("--tiny", action="store_true", help="two random tiny models (the smoke test)")
    args = p.parse_args()
    baseline, gated = load_models(args)
    if baseline.config["n_heads"] != gated.config["n_heads"] or attention_layers(baseline) != attention_layers(gated):
        sys.exit("the two models need the same attention layers and heads (patching moves patterns between them)")
    tok = gated.tokenizer or gatedlm.Tokenizer("byte")
    data = args.data or (args.demo and not args.text and os.path.join(args.demo, "data"))
    if data:
        stream = dataset_stream(data)
    elif args.text or args.tiny:
        stream = tok.encode(open(args.text, encoding="utf-8", errors="replace").read() if args.text
                            else "It was the best of times. " * 60)
    else:
        sys.exit("give --data DIR or --text FILE: windows like those the models were trained on")
    ids = bos_windows(tok, stream, args.windows, gated.config["max_seq_len"])
    os.makedirs(args.out, exist_ok=True)

    models = {"baseline": baseline, "gated": gated}
    caches = {name: m.run_with_cache(ids, names=[f"blocks.{l}.attn.hook_pattern" for l in attention_layers(m)])[1]
              for name, m in models.items()}
    effects = {}
    for name, model in models.items():
        donor = caches["gated" if name == "baseline" else "baseline"]
        effects[name] = {
            "ablate": head_effects(model, ids, lambda l, h: (f"blocks.{l}.attn.hook_pattern", without_bos(h))),
            "patch": head_effects(model, ids, lambda l, h, d=donor: (f"blocks.{l}.attn.hook_pattern",
                                                                     pattern_of(d, f"blocks.{l}.attn.hook_pattern", h))),
        }
    open_gate = {f"blocks.{l}.attn.hook_gate": (lambda s, n: np.ones_like(s)) for l in attention_layers(gated)}
    fattn = {"baseline": f_attn(baseline, ids), "gated": f_attn(gated, ids),
             "gated, gate clamped open": f_attn(gated, ids, hooks=open_gate)}

    print(f"{'head':>8} {'ablate BOS: baseline':>21} {'gated':>8} {'patched: baseline':>18} {'gated':>8}")
    for head in sorted(effects["baseline"]["ablate"]):
        e = effects
        print(f"{'L%dH%d' % head:>8} {e['baseline']['ablate'][head]:21.4f} {e['gated']['ablate'][head]:8.4f} "
              f"{e['baseline']['patch'][head]:18.4f} {e['gated']['patch'][head]:8.4f}")
    for label, values in fattn.items():
        print(f"F-Attn {label}: " + " ".join(f"{v:.3f}" for v in values))
    # A layer's pattern is computed before its gate: clamping moves only later layers' F-Attn.
    # What the model loses without the gate's closing is the loss change.
    opened = mean_loss(gated.run_with_hooks(ids, open_gate), ids) - mean_loss(gated.run_with_hooks(ids, {}), ids)
    print(f"gated model, gate clamped open: loss change {opened:+.4f} nats")
    print("wrote", plot(effects, fattn, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
