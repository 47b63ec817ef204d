"""npm packages fetched once with `npm pack` into ~/.cache/gatedlm/SUBDIR ($GATEDLM_CACHE)
and unpacked there, for the tests that run an official JavaScript client or reference:
tests/reference/test_jinja_hf.py, test_tokenizer_json.py, test_gguf_llama.py (llama.cpp's
libraries) and tests/serve/test_openai_client.py (which imports this file by path)."""
import os
import shutil
import subprocess
import tarfile


def cache_directory(subdir):
    """~/.cache/gatedlm/SUBDIR, or $GATEDLM_CACHE/SUBDIR, created if missing."""
    cache = os.path.join(os.environ.get("GATEDLM_CACHE", os.path.expanduser("~/.cache/gatedlm")), subdir)
    os.makedirs(cache, exist_ok=True)
    return cache


def unpacked_name(spec):
    """npm pack's name for spec's tarball, without .tgz: "@scope/name@1.2" -> "scope-name-1.2"."""
    name, version = spec.rsplit("@", 1)
    return f"{name.lstrip('@').replace('/', '-')}-{version}"


def npm_pack(spec, cache, into):
    """Fetches spec ("name@version", scoped or not) with `npm pack` into cache and unpacks the
    tarball into `into` (its files land in into/package). None, or why it could not."""
    if shutil.which("npm") is None:
        return "npm is not installed"
    try:
        p = subprocess.run(["npm", "pack", spec], cwd=cache, capture_output=True, text=True, timeout=240)
    except subprocess.TimeoutExpired:
        return f"npm pack {spec} timed out"
    tgz = os.path.join(cache, unpacked_name(spec) + ".tgz")
    if p.returncode != 0 or not os.path.exists(tgz):
        return f"npm pack {spec} failed: {p.stderr.strip()[-300:]}"
    os.makedirs(into, exist_ok=True)
    with tarfile.open(tgz) as t:
        t.extractall(into)
    return None


def npm_package(spec, subdir, marker="package.json"):
    """The unpacked package's directory (SUBDIR/<unpacked_name>/package, fetched unless its
    `marker` file is there), or (None, reason) when npm, node or the registry is unavailable."""
    cache = cache_directory(subdir)
    target = os.path.join(cache, unpacked_name(spec))
    if not os.path.exists(os.path.join(target, "package", marker)):
        why = npm_pack(spec, cache, target)
        if why:
            return None, why
    if shutil.which("node") is None:
        return None, "node is not installed"
    return os.path.join(target, "package"), None
