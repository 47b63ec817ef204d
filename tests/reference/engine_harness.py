"""What the reference scripts share about the engine: its seeded random numbers
(src/core/rng.h: SplitMix64, with streams derived from a seed and a name by FNV-1a) and
the setup of a run against the binary (is it there, where do the cases go)."""
import os
import tempfile

MASK64 = (1 << 64) - 1


def derive(seed, name):
    """Rng::derive: FNV-1a over the name's bytes, starting from the offset basis ^ seed."""
    h = (1469598103934665603 ^ seed) & MASK64
    for b in name.encode():
        h = ((h ^ b) * 1099511628211) & MASK64
    return h


class SplitMix64:
    def __init__(self, seed):
        self.state = seed & MASK64

    def next_u64(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def below(self, n):
        return self.next_u64() % n


def engine_binary(path, case_count):
    """The absolute path of the gatedlm binary, or None after printing why every case fails."""
    binary = os.path.abspath(path)
    if not os.access(binary, os.X_OK):
        print(f"error: {binary} is not an executable file")
        print(f"0 passed, {case_count} failed")
        return None
    return binary


def work_directory(workdir, prefix):
    """(work, tmp): the given --workdir (created), or a fresh temporary directory that the
    caller removes (tmp is None when the user chose the directory)."""
    if workdir:
        work = os.path.abspath(workdir)
        os.makedirs(work, exist_ok=True)
        return work, None
    tmp = tempfile.mkdtemp(prefix=prefix)
    return tmp, tmp
