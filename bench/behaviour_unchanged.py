#!/usr/bin/env python3
"""Two gatedlm binaries compute the same bits: a check for refactorings (issue 35).

  bench/behaviour_unchanged.py --before OLD/gatedlm --after build/gatedlm [--workdir DIR]

1. `debug grads` (logits, loss, every gradient, 3 AdamW steps) on the 52 reference
   configurations of tests/reference/test_against_engine.py: the two outputs byte for byte.
   Writing the cases needs PyTorch (/usr/bin/python3 with python3-torch); without it,
   --skip-grads.
2. Greedy `generate` (32 tokens, --json: ids and text) and `score --logprobs --json` on a
   dense, an MoE, a hybrid (Gated DeltaNet + gated softmax) model and quantised copies of
   them (dense Q4_0 and BF16, MoE Q8_0, hybrid Q4_0; random weights from `init`, byte
   tokenizer): the same ids, text and scores.

Prints one line per case and 'N passed, N failed' at the end; exits 1 on any difference.
"""
import argparse
import filecmp
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

BASE = {"vocab_size": 258, "d_model": 64, "n_layers": 4, "n_heads": 4, "n_kv_heads": 2, "head_dim": 16,
        "ffn_hidden": 128, "max_seq_len": 128, "init_std": 0.1}
MODELS = {
    "dense": dict(BASE, gate={"position": "sdpa"}),
    "moe": dict(BASE, moe={"n_experts": 4, "top_k": 2, "expert_hidden": 32}),
    "hybrid": dict(BASE, norm_zero_centered=True, gate={"position": "sdpa"}, full_attention_interval=2,
                   rope_dims=8, linear_attention={"n_k_heads": 2, "n_v_heads": 4, "k_head_dim": 16,
                                                  "v_head_dim": 16, "conv_kernel": 4}),
}
# Quantised checkpoints of those (source model, type): every kind of block the products read.
QUANTISED = [("dense", "q4_0"), ("moe", "q8_0"), ("hybrid", "q4_0"), ("dense", "bf16")]
ADAMW = ["--adamw-steps", "3", "--lr", "0.001", "--beta1", "0.9", "--beta2", "0.95", "--eps", "1e-8",
         "--weight-decay", "0.1"]


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"exit {p.returncode}: {' '.join(cmd)}\n{p.stderr[-2000:]}")
    return p.stdout


def grads_cases(work):
    cases = os.path.join(work, "grads")
    if not os.path.isdir(cases):
        run(["/usr/bin/python3", os.path.join(ROOT, "tests", "reference", "test_against_engine.py"),
             "--emit-only", cases])
    return sorted(d for d in os.listdir(cases) if os.path.isdir(os.path.join(cases, d))), cases


def check_grads(binaries, work):
    names, cases = grads_cases(work)
    results = []
    for name in names:
        case = os.path.join(cases, name)
        outs = []
        for tag, binary in binaries.items():
            out = os.path.join(case, f"{tag}.safetensors")
            run([binary, "debug", "grads", "--checkpoint", case, "--token-ids", os.path.join(case, "tokens.txt"),
                 "--out", out] + ADAMW)
            outs.append(out)
        results.append((f"debug grads {name}", filecmp.cmp(outs[0], outs[1], shallow=False)))
    return results


def make_models(binary, work):
    """Checkpoints made once with the 'before' binary, so both read the same files."""
    dirs = {}
    for name, config in MODELS.items():
        d = os.path.join(work, "models", name)
        if not os.path.isdir(d):
            cfg = os.path.join(work, f"{name}.json")
            with open(cfg, "w") as f:
                json.dump(config, f)
            run([binary, "init", "--config", cfg, "--seed", "7", "--out", d])
        dirs[name] = d
    for source, qtype in QUANTISED:
        q = os.path.join(work, "models", f"{source}_{qtype}")
        if not os.path.isdir(q):
            run([binary, "quantize", dirs[source], "--type", qtype, "--out", q])
        dirs[f"{source} {qtype}"] = q
    return dirs


def check_decoding(binaries, work):
    ids = os.path.join(work, "ids.txt")
    with open(ids, "w") as f:
        f.write("256 72 101 108 108 111 44 32 119 111 114 108 100\n256 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15\n")
    results = []
    for name, d in make_models(binaries["before"], work).items():
        gen, score = [], []
        for binary in binaries.values():
            g = json.loads(run([binary, "generate", "--checkpoint", d, "--tokenizer", "byte", "--prompt",
                                "The gate opens", "--max-tokens", "32", "--temperature", "0", "--json"]))
            gen.append((g["ids"], g["text"]))
            score.append(run([binary, "score", "--checkpoint", d, "--token-ids", ids, "--logprobs", "--json"]))
        results.append((f"generate {name}", gen[0] == gen[1]))
        results.append((f"score {name}", score[0] == score[1]))
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--workdir", help="keep cases and models here (reused when present)")
    ap.add_argument("--skip-grads", action="store_true", help="only the decoding checks")
    args = ap.parse_args()
    binaries = {"before": os.path.abspath(args.before), "after": os.path.abspath(args.after)}
    work = args.workdir or tempfile.mkdtemp(prefix="gatedlm_behaviour_")
    os.makedirs(work, exist_ok=True)
    results = check_decoding(binaries, work)
    if not args.skip_grads:
        results += check_grads(binaries, work)
    for name, same in results:
        print(f"{name:<40} {'same' if same else 'DIFFERENT'}")
    failed = sum(1 for _, same in results if not same)
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
