"""PyTorch as a fair peer: the BLAS under its matrix products, named and checked.

Debian's python3-torch multiplies through the system BLAS. With the reference BLAS alone it is
~10x slower (a strawman), and Debian 12's OpenBLAS (0.3.21) falls back to its SSE3 "Prescott"
kernels on CPUs it does not know (an Intel Xeon of family 6 model 207: 45 GFLOP/s at 2 threads
where its SkylakeX kernels give 198). fair_torch_blas() refuses the first, and for the second
sets OPENBLAS_CORETYPE to the kernels this CPU's instructions allow (SkylakeX with AVX-512,
Haswell with AVX2) for every PyTorch process started after it, and for this one if it imports
torch afterwards. A core type already set in the environment that leaves AVX-512 unused on a
CPU that has it is unset, so that OpenBLAS picks for itself: a machine whose environment sets
OPENBLAS_CORETYPE=Haswell held an AVX-512 Zen 5 to its AVX2 kernels, 120 GFLOP/s (median of 8
products of 2048^3 at 2 threads) where OpenBLAS's own pick, Cooperlake, gave 167. Used by
compare_pytorch.py, compare_hybrid_train.py, compare_moe.py and compare_generate.py, whose
reports print the line it returns.
"""
import os
import re
import subprocess
import sys

_PROBE = ("import torch,time;torch.set_num_threads({threads});a=torch.randn(1024,1024);a@a;ts=[]\n"
          "for _ in range(3):\n t=time.perf_counter();a@a;ts.append(time.perf_counter()-t)\n"
          "print(2*1024**3/min(ts)/1e9)")


def _probe(threads):
    """(GFLOP/s of a 1024^3 product, OpenBLAS's core name or None) in a fresh /usr/bin/python3."""
    r = subprocess.run(["/usr/bin/python3", "-c", _PROBE.format(threads=threads)], capture_output=True, text=True,
                       env={**os.environ, "OPENBLAS_VERBOSE": "2"})
    if r.returncode != 0:
        sys.exit(f"PyTorch does not run under /usr/bin/python3: {r.stderr[-500:]}")
    core = re.search(r"Core: (\S+)", r.stdout + r.stderr)
    return float(r.stdout.strip().splitlines()[-1]), core.group(1) if core else None


# OpenBLAS's core types whose kernels use AVX-512.
_AVX512_CORES = {"skylakex", "cooperlake", "sapphirerapids"}


def _cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            line = next((l for l in f if l.startswith("flags")), "")
    except OSError:
        return set()
    return set(line.split(":", 1)[-1].split())


def fair_torch_blas(threads, minimum_gflops):
    """Check (and where OpenBLAS fell back to generic kernels, fix) PyTorch's BLAS for this
    machine; exit naming the fix when it is the reference BLAS. Returns a line for the report."""
    note = ""
    preset = os.environ.get("OPENBLAS_CORETYPE", "")
    if preset and preset.lower() not in _AVX512_CORES and "avx512f" in _cpu_flags():
        del os.environ["OPENBLAS_CORETYPE"]
        note = f" (OPENBLAS_CORETYPE={preset} in the environment unset here: it leaves this CPU's AVX-512 unused)"
    gflops, core = _probe(threads)
    if core == "Prescott" and "OPENBLAS_CORETYPE" not in os.environ:
        flags = _cpu_flags()
        chosen = "SkylakeX" if "avx512f" in flags else "Haswell" if "avx2" in flags else None
        if chosen:
            os.environ["OPENBLAS_CORETYPE"] = chosen
            before = gflops
            gflops, core = _probe(threads)
            note += (f" (OPENBLAS_CORETYPE={chosen} set here: this OpenBLAS fell back to its generic Prescott "
                     f"kernels on this CPU, {before:.0f} GFLOP/s)")
    if core is None and gflops < minimum_gflops:
        sys.exit(f"PyTorch multiplies at {gflops:.1f} GFLOP/s: the reference BLAS is in use. "
                 "Install OpenBLAS (apt-get install libopenblas0-pthread) for a fair peer.")
    blas = f"OpenBLAS, {core} kernels" if core else "not OpenBLAS"
    return f"PyTorch's BLAS: {blas}, {gflops:.0f} GFLOP/s on a 1024^3 product at {threads} threads{note}"
