"""An npm package fetched once with `npm pack` into ~/.cache/gatedlm/SUBDIR ($GATEDLM_CACHE)
and unpacked there, for the tests that run an official JavaScript client or reference.
(tests/reference/test_jinja_hf.py, test_tokenizer_json.py and test_gguf_llama.py still hold
their own copies of this; they could use it.)"""
import os
import shutil
import subprocess
import tarfile


def npm_package(spec, subdir):
    """The unpacked package's directory for spec ("name@version", scoped or not), or
    (None, reason) when npm, node or the registry is unavailable."""
    cache = os.path.join(os.environ.get("GATEDLM_CACHE", os.path.expanduser("~/.cache/gatedlm")), subdir)
    os.makedirs(cache, exist_ok=True)
    name, version = spec.rsplit("@", 1)
    target = os.path.join(cache, f"{name.lstrip('@').replace('/', '-')}-{version}")
    if not os.path.exists(os.path.join(target, "package", "package.json")):
        if shutil.which("npm") is None:
            return None, "npm is not installed"
        try:
            p = subprocess.run(["npm", "pack", spec], cwd=cache, capture_output=True, text=True, timeout=240)
        except subprocess.TimeoutExpired:
            return None, f"npm pack {spec} timed out"
        tgz = target + ".tgz"
        if p.returncode != 0 or not os.path.exists(tgz):
            return None, f"npm pack {spec} failed: {p.stderr.strip()[-300:]}"
        os.makedirs(target, exist_ok=True)
        with tarfile.open(tgz) as t:
            t.extractall(target)
    if shutil.which("node") is None:
        return None, "node is not installed"
    return os.path.join(target, "package"), None
