#!/usr/bin/python3
"""Incremental decoding (prefill + decode over the KV cache) against the full-sequence
forward, for every configuration of test_against_engine.CASES (the PyTorch reference list).

For each case: the case's float32 weights as a checkpoint, and nine sequences of
different lengths with different prompt lengths (one-token prompts, a prompt that is
the whole sequence). Then

    gatedlm debug decode --checkpoint DIR --token-ids DIR/decode_tokens.txt
                         --prompt-lengths P1,P2,... --out DIR/decode.safetensors

runs sequence i's prompt at step i while the earlier sequences decode (continuous
batching in one forward), and writes the logits of every token both ways. Checks, per
sequence: ||incremental - full|| / ||full|| <= 1e-5, and the full forward against the
PyTorch reference (float64) within the reference harness's 1e-4. Steps 8-15 decode five
sequences at once, more than the skinny kernel's 4 rows, so the decoder multiplies by its
packed copies of the weights there (kernels::PackedWeights); the run must report some.

Usage: /usr/bin/python3 tests/reference/test_decode_against_forward.py --gatedlm build/gatedlm
           [--workdir DIR] [--only a,b]
"""

import argparse
import copy
import os
import re
import shutil
import subprocess
import sys
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402

import hybrid_reference  # noqa: E402
import safetensors_io  # noqa: E402
from engine_harness import engine_binary, work_directory  # noqa: E402
from moe_reference import min_routing_margin  # noqa: E402
from test_against_engine import CASES, MOE_MARGIN, build_case, rel_err, select_cases, TOL as REFERENCE_TOL  # noqa: E402

TOL = 1e-5
LENGTHS = [12, 7, 10, 3, 12, 12, 12, 12, 12]
PROMPTS = [5, 1, 10, 2, 1, 1, 1, 1, 1]
# Cases with a "__seq__" (hybrid_seq100): prompts longer than one 64-token chunk of the
# engine's chunked delta rule (prefill carries the state across chunks, then decoding
# continues from it), a prompt of exactly 64, and long decodes from one token.
LONG_LENGTHS = [100, 70, 12, 3, 100, 66, 12, 12, 12]
LONG_PROMPTS = [80, 1, 10, 2, 65, 64, 1, 1, 1]


def lengths_and_prompts(name):
    return (LONG_LENGTHS, LONG_PROMPTS) if "__seq__" in CASES[name] else (LENGTHS, PROMPTS)


def write_checkpoint(directory, cfg_json, model, sequences):
    import json
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(cfg_json, f, indent=2)
    safetensors_io.save(os.path.join(directory, "model.safetensors"), model.state_dict_flat(),
                        metadata={"format": "pt"})
    with open(os.path.join(directory, "decode_tokens.txt"), "w") as f:
        for s in sequences:
            f.write(" ".join(str(t) for t in s.tolist()) + "\n")


def routed_case(name):
    """build_case's model and the test's sequences; for an MoE model the first seed whose
    router decisions on these sequences are away from ties (unless exact ones), since the
    float32 engine and the float64 reference may otherwise choose different experts."""
    for attempt in range(20):
        cfg_json, model, _ = build_case(name, attempt)
        gen = torch.Generator().manual_seed(4242)
        seqs = [torch.randint(0, model.cfg.vocab_size, (n,), generator=gen)
                for n in lengths_and_prompts(name)[0]]
        m64 = copy.deepcopy(model).to(torch.float64)
        with torch.no_grad():
            margin = min((run_margin(m64, s) for s in seqs), default=float("inf"))
        if margin >= MOE_MARGIN:
            return cfg_json, model, seqs
    raise RuntimeError(f"{name}: no seed with router decisions away from ties")


def run_margin(m64, s):
    m64(s.reshape(1, -1))
    return min_routing_margin(m64)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gatedlm", required=True)
    ap.add_argument("--workdir")
    ap.add_argument("--only", action="append")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    names = select_cases(args.only)
    binary = engine_binary(args.gatedlm, len(names))
    if binary is None:
        return 1
    work, tmp = work_directory(args.workdir, "gatedlm_decode_")
    t0 = time.time()
    passed = failed = skipped = 0
    try:
        for name in names:
            cfg_json, model, seqs = routed_case(name)
            case_dir = os.path.join(work, name)
            write_checkpoint(case_dir, cfg_json, model, seqs)
            out = os.path.join(case_dir, "decode.safetensors")
            cmd = [binary, "debug", "decode", "--checkpoint", case_dir,
                   "--token-ids", os.path.join(case_dir, "decode_tokens.txt"),
                   "--prompt-lengths", ",".join(map(str, lengths_and_prompts(name)[1])), "--out", out]
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
            missing_key = hybrid_reference.engine_lacks_hybrid(p.stdout.decode(errors="replace")) \
                if p.returncode != 0 else None
            if missing_key:
                print(f"{name:<24} SKIP (the engine does not know the hybrid config key \"{missing_key}\" yet)")
                skipped += 1
                continue
            if p.returncode != 0:
                print(f"{name:<24} FAIL (exit {p.returncode})\n  " + p.stdout.decode(errors="replace")[-2000:])
                failed += 1
                continue
            got = safetensors_io.load(out)
            problems = []
            packed = re.search(r"(\d+) packed weight matrices", p.stdout.decode(errors="replace"))
            if not packed or int(packed.group(1)) == 0:
                problems.append("no decode step used packed weights (kernels::PackedWeights)")
            worst_inc = worst_ref = 0.0
            row = 0
            m64 = model.to(torch.float64)
            for s in seqs:
                n = len(s)
                full = got["full_logits"][row:row + n]
                inc = got["incremental_logits"][row:row + n]
                with torch.no_grad():
                    ref = m64(s.reshape(1, -1))[0]
                e_inc, e_ref = rel_err(inc, full), rel_err(full, ref)
                worst_inc, worst_ref = max(worst_inc, e_inc), max(worst_ref, e_ref)
                if not e_inc <= TOL:
                    problems.append(f"sequence of {n} tokens: incremental vs full {e_inc:.2e} > {TOL:g}")
                if not e_ref <= REFERENCE_TOL:
                    problems.append(f"sequence of {n} tokens: full vs reference {e_ref:.2e} > {REFERENCE_TOL:g}")
                row += n
            ok = not problems
            print(f"{name:<24} incremental {worst_inc:.2e}  reference {worst_ref:.2e}  {'PASS' if ok else 'FAIL'}")
            for pr in problems:
                print("  " + pr)
            passed += ok
            failed += not ok
            sys.stdout.flush()
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"({time.time() - t0:.1f} s; {len(CASES)} configurations known, {len(names)} run)")
    if skipped:
        print(f"({skipped} hybrid case(s) skipped: the engine rejects their config keys as unknown)")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
