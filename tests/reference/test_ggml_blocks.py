#!/usr/bin/python3
"""gatedlm's GGUF block conversions against ggml's own (tests/llama/ggml_blocks_probe.cpp).

For every block type gatedlm converts (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K ... Q6_K, IQ4_NL,
IQ4_XS), the probe quantises rows of several distributions with gatedlm and with
ggml_quantize_chunk (what llama.cpp's quantiser writes without an importance matrix) and
expects the same bytes, and dequantises ggml's blocks and random ones with both and expects
the same fp32 bits. ggml is npm's @node-llama-cpp/linux-x64 build (test_gguf_llama fetches
it once into ~/.cache/gatedlm). Exit status 77 (ctest: skipped) with the reason when npm or
the package is unavailable.

Usage: /usr/bin/python3 tests/reference/test_ggml_blocks.py --probe build/tests/ggml_blocks_probe
"""
import argparse
import os
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import test_gguf_llama as gl  # noqa: E402

SKIP = 77


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--probe", required=True)
    args = ap.parse_args(argv)
    libdir, why = gl.fetch_llama_libs()
    if libdir is None:
        print(f"SKIP: llama.cpp's libraries are unavailable ({why})")
        return SKIP
    p = subprocess.run([os.path.abspath(args.probe), libdir], capture_output=True, text=True, timeout=600)
    sys.stdout.write(p.stdout)
    sys.stderr.write(p.stderr)
    types = [line.split()[0] for line in p.stdout.splitlines() if line.strip()]
    expected = {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS"}
    if set(types) != expected:
        print(f"FAIL: the probe compared {sorted(types)}, expected {sorted(expected)}")
        return 1
    print("PASS" if p.returncode == 0 else "FAIL")
    return p.returncode


if __name__ == "__main__":
    sys.exit(main())
