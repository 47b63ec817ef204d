"""Bad input raises a Python exception (with the command line's message where the command
line has one); nothing crashes the interpreter."""
import numpy as np
import pytest

import gatedlm
from conftest import BASELINE, GATED


def cli_error(run_cli, *args):
    r = run_cli(*args, check=False)
    assert r.returncode != 0
    return r.stderr.strip().splitlines()[-1].removeprefix("gatedlm: error: ")


@pytest.fixture(scope="module")
def model(gated_checkpoint):
    return gatedlm.Model.load(gated_checkpoint)


def test_missing_checkpoint_is_file_not_found_with_cli_message(work, run_cli):
    ids = work / "ids_for_errors.txt"
    ids.write_text("256 65 66\n")
    missing = work / "no_such_checkpoint"
    with pytest.raises(gatedlm.PathNotFoundError) as e:
        gatedlm.Model.load(missing)
    assert isinstance(e.value, FileNotFoundError) and isinstance(e.value, gatedlm.Error)
    assert str(e.value) == cli_error(run_cli, "score", "--checkpoint", missing, "--token-ids", ids)


def test_bad_sampling_has_cli_message(model, gated_checkpoint, run_cli):
    with pytest.raises(gatedlm.Error) as e:
        model.generate("hi", temperature=-1, tokenizer="byte")
    assert str(e.value) == cli_error(run_cli, "generate", "--checkpoint", gated_checkpoint, "--tokenizer", "byte",
                                     "--prompt", "hi", "--temperature", "-1")


@pytest.mark.parametrize("ids, error", [
    (np.array([1.0, 2.0]), TypeError),                           # float ids
    ([0.5, 1], TypeError),
    (np.array([True, False]), TypeError),
    ([256, 300], ValueError),                                    # outside the vocabulary
    ([256, -1], ValueError),
    (np.zeros((2, 2, 2), dtype=np.int32), ValueError),           # wrong shape
    ([], ValueError),
    ([[256, 1], [256]], ValueError),                             # ragged batch
    (np.arange(0, 40, dtype=np.int32)[::2], ValueError),         # non-contiguous
    (np.zeros((1, 65), dtype=np.int32), ValueError),             # longer than max_seq_len
    ("hello", TypeError),
])
def test_bad_ids_raise(model, ids, error):
    with pytest.raises(error):
        model.forward(ids)


def test_bad_captures_raise(model, gated_config):
    with pytest.raises(ValueError, match="unknown name"):
        model.forward([256, 1], capture=["attentions"])
    with pytest.raises(ValueError):
        model.forward([256, 1, 2], capture=["attention"], attention_window=(2, 9))
    baseline = gatedlm.Model.init(BASELINE, seed=1)
    with pytest.raises(ValueError, match="no attention gate"):
        baseline.forward([256, 1], capture=["gate_scores"])
    with pytest.raises(ValueError, match="mixture-of-experts"):
        baseline.forward([256, 1], capture=["moe_routing"])


def test_use_after_close_raises(gated_checkpoint):
    m = gatedlm.Model.load(gated_checkpoint)
    with m:
        m.forward([256, 1])
    assert m.closed
    for call in (lambda: m.forward([256, 1]), lambda: m.score([256, 1]), lambda: m.params(), lambda: m.config,
                 lambda: m.generate("a", tokenizer="byte")):
        with pytest.raises(ValueError, match="closed"):
            call()


def test_bad_state_dict_raises(model):
    state = model.state_dict()
    missing = dict(state)
    del missing["model.norm.weight"]
    with pytest.raises(gatedlm.Error, match="model.norm.weight"):
        gatedlm.Model.from_state_dict(GATED, missing)
    with pytest.raises(gatedlm.Error, match="not a parameter"):
        gatedlm.Model.from_state_dict(GATED, dict(state, extra=np.zeros(3, np.float32)))
    with pytest.raises(ValueError, match="shape"):
        gatedlm.Model.from_state_dict(GATED, dict(state, **{"model.norm.weight": np.ones(3, np.float32)}))
    with pytest.raises(TypeError, match="float32"):
        gatedlm.Model.from_state_dict(GATED, dict(state, **{"model.norm.weight": np.ones(64)}))


def test_bad_config_and_tokenizer_raise(work):
    with pytest.raises(gatedlm.Error, match="d_model"):
        gatedlm.Model.init(dict(GATED, d_model=-3))
    with pytest.raises(gatedlm.PathNotFoundError):
        gatedlm.Tokenizer(str(work / "missing.model"))
    with pytest.raises(TypeError):
        gatedlm.Model.init(42)


def test_bad_training_flags_raise(work, dataset):
    with pytest.raises(gatedlm.Error, match="no_such_flag"):
        gatedlm.train(GATED, dataset, work / "bad_run", no_such_flag=1, steps=1)
    with pytest.raises(gatedlm.PathNotFoundError):
        gatedlm.train(GATED, work / "no_data", work / "bad_run2", steps=1)
