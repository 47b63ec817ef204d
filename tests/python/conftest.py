"""Fixtures of the Python package's tests: the gatedlm binary (the command line the package
must agree with), tiny configs, checkpoints and a prepared byte-level dataset.

Run by ctest (tests/CMakeLists.txt, label `python`) as
    PYTHONPATH=BUILD/python /usr/bin/python3 -m pytest tests/python --gatedlm BUILD/gatedlm
"""
import json
import os
import subprocess

import pytest

TEXT = ("It was the best of times, it was the worst of times, it was the age of wisdom, it was the age "
        "of foolishness, it was the epoch of belief, it was the epoch of incredulity. ") * 40

# A G1-gated model with grouped KV heads (4 query heads on 2 KV heads).
GATED = {"vocab_size": 258, "d_model": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "head_dim": 16,
         "ffn_hidden": 128, "max_seq_len": 64,
         "gate": {"position": "sdpa", "granularity": "elementwise", "activation": "sigmoid"}}
BASELINE = {k: v for k, v in GATED.items() if k != "gate"}


def pytest_addoption(parser):
    parser.addoption("--gatedlm", default=os.environ.get("GATEDLM_BINARY", "build/gatedlm"),
                     help="the gatedlm binary the package is compared with")


@pytest.fixture(scope="session")
def gatedlm_bin(request):
    path = os.path.abspath(request.config.getoption("--gatedlm"))
    assert os.access(path, os.X_OK), f"{path}: no gatedlm binary (build it, or pass --gatedlm)"
    return path


@pytest.fixture(scope="session")
def run_cli(gatedlm_bin):
    def run(*args, check=True):
        r = subprocess.run([gatedlm_bin, *map(str, args)], capture_output=True, text=True)
        if check:
            assert r.returncode == 0, f"gatedlm {' '.join(map(str, args))}: {r.stderr}"
        return r
    return run


@pytest.fixture(scope="session")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("gatedlm-python")


def write_json(path, obj):
    path.write_text(json.dumps(obj))
    return path


@pytest.fixture(scope="session")
def gated_config(work):
    return write_json(work / "gated.json", GATED)


@pytest.fixture(scope="session")
def gated_checkpoint(work, gated_config, run_cli):
    out = work / "gated_ckpt"
    run_cli("init", "--config", gated_config, "--out", out, "--seed", 7)
    return out


@pytest.fixture(scope="session")
def text_file(work):
    path = work / "corpus.txt"
    path.write_text(TEXT)
    return path


@pytest.fixture(scope="session")
def dataset(work, text_file, run_cli):
    out = work / "data"
    run_cli("data", "prepare", "--tokenizer", "byte", "--input", text_file, "--out", out, "--val-fraction", "0.2")
    return out
