#!/usr/bin/python3
"""How many OpenMP parallel regions a decode step opens, and where (issue 41): a decode step of
two threads pays each region's wake-up and join, and a region whose loop has fewer iterations
than threads only makes the others wait (bench/RESULTS.md, "Decode batches on Zen 5").

A small shim, compiled here with gcc and preloaded over libgomp's GOMP_parallel, counts the
regions opened with more than one thread (GCC calls GOMP_parallel with one thread for a false
`if` clause: those are not counted) by the function OpenMP outlined for each. `gatedlm bench
generate --batch B --reps 1` runs twice, with --new-tokens N and 2N; the difference over the
extra steps (both runs decode a warm-up rep too) is the count a step, exact, whatever the
machine's load. Names come from addr2line (binutils).

Usage: /usr/bin/python3 bench/openmp_regions.py --gatedlm build/gatedlm CK [CK ...]
          [--batch 1,8] [--threads 2] [--prompt-tokens 8] [--new-tokens 16]
Prints a markdown table per checkpoint and batch: regions a step by site, and the total."""
import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile

SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#define SITES 4096
static void* site[SITES];
static long count[SITES];
static int sites;
static void report(void) {
  const char* path = getenv("GATEDLM_REGIONS_OUT");
  FILE* out = path ? fopen(path, "w") : NULL;
  if (!out) return;
  for (int i = 0; i < sites; ++i) {
    Dl_info info;
    if (!dladdr(site[i], &info) || !info.dli_fname) continue;
    fprintf(out, "%ld %s %lx\n", count[i], info.dli_fname, (unsigned long)((char*)site[i] - (char*)info.dli_fbase));
  }
  fclose(out);
}
void GOMP_parallel(void (*fn)(void*), void* data, unsigned threads, unsigned flags) {
  static void (*real)(void (*)(void*), void*, unsigned, unsigned);
  if (!real) {
    real = (void (*)(void (*)(void*), void*, unsigned, unsigned))dlsym(RTLD_NEXT, "GOMP_parallel");
    atexit(report);
  }
  if (threads != 1) {
    int i = 0;
    while (i < sites && site[i] != (void*)fn) ++i;
    if (i == sites && sites < SITES) site[sites++] = (void*)fn;
    if (i < SITES) ++count[i];
  }
  real(fn, data, threads, flags);
}
"""


def build_shim(work):
    source, library = os.path.join(work, "regions.c"), os.path.join(work, "regions.so")
    with open(source, "w") as f:
        f.write(SHIM)
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", source, "-o", library, "-ldl"], check=True)
    return library


def counts(a, shim, work, ck, batch, new_tokens):
    """{(object, offset): regions} of one `bench generate` run."""
    out = os.path.join(work, "regions.txt")
    env = dict(os.environ, LD_PRELOAD=shim, GATEDLM_REGIONS_OUT=out, OMP_NUM_THREADS=str(a.threads))
    cmd = [a.gatedlm, "bench", "generate", "--checkpoint", ck, "--batch", str(batch), "--prompt-tokens",
           str(a.prompt_tokens), "--new-tokens", str(new_tokens), "--reps", "1", "--bandwidth-gbs", "1"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stderr}")
    found = collections.Counter()
    with open(out) as f:
        for line in f:
            n, obj, offset = line.split()
            found[(obj, offset)] += int(n)
    return found


def site_name(obj, offset):
    """The function that holds a region, without its arguments and OpenMP's clone suffix."""
    r = subprocess.run(["addr2line", "-f", "-C", "-e", obj, "0x" + offset], capture_output=True, text=True)
    name = r.stdout.splitlines()[0] if r.returncode == 0 and r.stdout else "??"
    if name == "??":
        return f"{os.path.basename(obj)}+0x{offset}"
    name = re.sub(r" \[clone [^\]]*\]", "", name).replace("(anonymous namespace)::", "")
    depth, short = 0, ""
    for ch in name:  # drop argument lists and template arguments, keep the qualified name
        if ch in "(<":
            depth += 1
        elif ch in ")>":
            depth -= 1
        elif depth == 0:
            short += ch
    return short.replace("void ", "").replace("auto ", "").strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gatedlm", default=os.path.join(os.path.dirname(__file__), "..", "build", "gatedlm"))
    ap.add_argument("checkpoints", nargs="+")
    ap.add_argument("--batch", default="1,8")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt-tokens", type=int, default=8)
    ap.add_argument("--new-tokens", type=int, default=16)
    a = ap.parse_args()
    if a.threads < 2 or a.new_tokens < 1:
        sys.exit("--threads must be at least 2 (one thread opens no region) and --new-tokens at least 1")
    with tempfile.TemporaryDirectory(prefix="gatedlm_regions_") as work:
        shim = build_shim(work)
        for ck in a.checkpoints:
            for batch in (int(b) for b in a.batch.split(",")):
                short, long = counts(a, shim, work, ck, batch, a.new_tokens), counts(a, shim, work, ck, batch,
                                                                                      2 * a.new_tokens)
                steps = 2 * a.new_tokens  # the warm-up rep and the measured one, a.new_tokens more each
                per_step = collections.Counter()
                for key in set(short) | set(long):
                    per_step[site_name(*key)] += (long[key] - short[key]) / steps
                print(f"\n## {ck}, batch {batch}, {a.threads} threads: parallel regions a decode step\n")
                print("| where | regions a step |\n| --- | ---: |")
                for name, n in sorted(per_step.items(), key=lambda kv: -kv[1]):
                    if n >= 0.5:
                        print(f"| `{name}` | {n:.0f} |")
                print(f"| **all** | **{sum(per_step.values()):.0f}** |")


if __name__ == "__main__":
    main()
