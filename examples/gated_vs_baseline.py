#!/usr/bin/env python3
"""Train a baseline and a G1-gated model for a few minutes each with gatedlm's Python
package, then plot what the paper is about: the attention on the first token (the sink),
the gate scores, and the massive activations in the residual stream.

    cmake --build build                     # builds build/python/gatedlm too
    PYTHONPATH=build/python /usr/bin/python3 examples/gated_vs_baseline.py --minutes 3

Both models see the same seed, batches and schedule (the demo's rule); the gated model is
the baseline plus the elementwise sigmoid gate after SDPA. Figures and runs go to --out.
--steps N replaces the time budget with N steps, --tiny shrinks the models (the smoke test
runs `--tiny --steps 3`).
"""
import argparse
import glob
import os
import sys

import matplotlib

matplotlib.use("Agg")  # files only: no display needed
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import gatedlm  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def model_configs(tiny):
    base = dict(vocab_size=258, d_model=128, n_layers=4, n_heads=4, n_kv_heads=4, head_dim=32, ffn_hidden=352,
                max_seq_len=128)
    if tiny:
        base.update(d_model=32, n_layers=2, n_heads=2, n_kv_heads=2, head_dim=16, ffn_hidden=64, max_seq_len=32)
    gated = dict(base, gate={"position": "sdpa", "granularity": "elementwise", "activation": "sigmoid"})
    return {"baseline": base, "gated": gated}


def windows(text, count, length):
    """`count` windows of BOS + length-1 bytes from evenly spaced offsets of the text."""
    tok = gatedlm.Tokenizer("byte")
    stream = tok.encode(text)
    step = max(1, (len(stream) - length) // count)
    return np.array([[tok.bos_id] + stream[i * step:i * step + length - 1] for i in range(count)], dtype=np.int32)


def train_both(args, data, configs):
    budget = {"steps": args.steps} if args.steps else {"minutes": args.minutes}
    seq_len = configs["baseline"]["max_seq_len"]
    runs = {}
    for name, config in configs.items():
        out = os.path.join(args.out, "runs", name)

        def show(rec, name=name):
            if "loss" in rec and rec["step"] % 25 == 0:
                print(f"{name:8s} step {rec['step']:5d}  loss {rec['loss']:.3f}  {rec['tokens_per_s']:.0f} tok/s",
                      flush=True)

        summary = gatedlm.train(config, data, out, callback=show, batch_size=8, seq_len=seq_len, lr=2e-3,
                                warmup=min(50, args.steps or 50), eval_every=0, save_every=0, seed=1, **budget)
        print(f"{name}: {summary['steps']} steps, val loss {summary['val_loss']:.4f}", flush=True)
        runs[name] = out
    return runs


def plot(models, ids, out_dir):
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    for name, model in models.items():
        out = model.forward(ids, capture=["attention", "hidden_states"] + (["gate_scores"] if name == "gated" else []))
        att = out["attention"]                            # [batch, layers, heads, T, T]
        first = att[:, :, :, 1:, 0].mean(axis=(0, 2, 3))  # mean attention of queries t >= 1 on token 0, per layer
        axes[0].plot(range(len(first)), first, marker="o", label=name)
        m_act = np.abs(out["hidden_states"]).max(axis=(0, 2, 3))  # largest |h| per layer
        axes[2].plot(range(len(m_act)), m_act, marker="o", label=name)
        if name == "gated":
            axes[1].hist(out["gate_scores"].ravel(), bins=50, range=(0, 1), color="tab:orange")
    axes[0].set(title="Attention on the first token (F-Attn)", xlabel="layer", ylabel="mean attention")
    axes[1].set(title="Gate scores (gated model)", xlabel="sigmoid score", ylabel="count")
    axes[2].set(title="Massive activations", xlabel="layer", ylabel="max |h| after the block", yscale="log")
    axes[0].legend()
    axes[2].legend()
    fig.tight_layout()
    path = os.path.join(out_dir, "gated_vs_baseline.png")
    fig.savefig(path, dpi=110)
    return path


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=3.0, help="training budget per model (default 3)")
    p.add_argument("--steps", type=int, default=0, help="train this many steps instead of --minutes")
    p.add_argument("--corpus", nargs="+", help="text files (default: the repository's README and docs)")
    p.add_argument("--out", default="runs/python-example", help="directory for the runs and the figure")
    p.add_argument("--tiny", action="store_true", help="tiny models (the smoke test)")
    args = p.parse_args()
    corpus = args.corpus or [os.path.join(HERE, "..", "README.md")] + sorted(glob.glob(os.path.join(HERE, "..", "docs",
                                                                                                    "*.md")))
    os.makedirs(args.out, exist_ok=True)
    data = os.path.join(args.out, "data")
    gatedlm.prepare_data(corpus, data, tokenizer="byte", val_fraction=0.1, force=True)
    configs = model_configs(args.tiny)
    runs = train_both(args, data, configs)
    models = {name: gatedlm.Model.load(run) for name, run in runs.items()}
    text = "".join(open(f, encoding="utf-8", errors="replace").read() for f in corpus)
    ids = windows(text, 4, configs["baseline"]["max_seq_len"])
    for name, model in models.items():
        a = model.analyze(text, "byte", sequences=4, seq_len=configs["baseline"]["max_seq_len"])
        gate = "" if a["gates"] is None else f", gate score {a['gates']['mean_score']:.3f}"
        print(f"{name}: F-Attn {a['f_attn']['mean']:.3f}, M-Act {a['massive_activations']['m_act']:.1f}{gate}")
    print("wrote", plot(models, ids, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
