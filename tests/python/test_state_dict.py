"""Weights as NumPy arrays: names, zero-copy views, bit-exact round trips (also via torch)."""
import numpy as np
import pytest

import gatedlm
from conftest import GATED


def test_state_dict_round_trips_bit_for_bit(gated_checkpoint, tmp_path):
    model = gatedlm.Model.load(gated_checkpoint)
    state = model.state_dict()
    assert "model.embed_tokens.weight" in state and "model.layers.1.self_attn.o_proj.weight" in state
    assert all(a.dtype == np.float32 for a in state.values())
    again = gatedlm.Model.from_state_dict(model.config, state)
    for name, value in again.state_dict().items():
        assert value.tobytes() == state[name].tobytes(), name
    again.save(tmp_path / "copy")
    loaded = gatedlm.Model.load(tmp_path / "copy")
    for name, value in loaded.state_dict().items():
        assert value.tobytes() == state[name].tobytes(), name
    ids = [256, 72, 101, 108, 108, 111]
    np.testing.assert_array_equal(loaded.forward(ids)["logits"], model.forward(ids)["logits"])


def test_params_are_views_that_outlive_close(gated_checkpoint):
    model = gatedlm.Model.load(gated_checkpoint)
    params = model.params()
    norm = params["model.norm.weight"]
    before = model.forward([256, 65, 66])["logits"].copy()
    norm *= 2.0  # a view: the model changes
    assert not np.array_equal(model.forward([256, 65, 66])["logits"], before)
    assert model.state_dict()["model.norm.weight"][0] == norm[0]
    model.close()
    assert float(norm.sum()) != 0.0  # the buffer stays alive while views exist


def test_torch_round_trip(gated_checkpoint):
    torch = pytest.importorskip("torch")
    model = gatedlm.Model.load(gated_checkpoint)
    tensors = {k: torch.from_numpy(v) for k, v in model.params().items()}
    back = gatedlm.Model.from_state_dict(GATED, {k: t.numpy() for k, t in tensors.items()})
    for name, value in back.params().items():
        assert value.tobytes() == tensors[name].numpy().tobytes()


def test_init_equals_cli_init(gated_config, gated_checkpoint):
    fresh = gatedlm.Model.init(str(gated_config), seed=7)  # the fixture's `gatedlm init --seed 7`
    loaded = gatedlm.Model.load(gated_checkpoint)
    for name, value in fresh.params().items():
        assert value.tobytes() == loaded.params()[name].tobytes(), name
    assert fresh.config == loaded.config


def test_load_reads_a_gguf_file_as_import_does(gated_config, run_cli, work, tmp_path):
    """Model.load on a GGUF file (llama.cpp's qwen3, written by `gatedlm export`) gives the
    weights `gatedlm import` reads from it: those of the ungated model it was exported from."""
    import json
    cfg = json.loads(gated_config.read_text())
    cfg.pop("gate")
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps(cfg))
    ckpt = tmp_path / "plain_ckpt"
    run_cli("init", "--config", plain, "--out", ckpt, "--seed", 3)
    run_cli("export", ckpt, "--format", "gguf", "--out", tmp_path / "gguf")
    gguf = tmp_path / "gguf" / "model.gguf"
    original = gatedlm.Model.load(ckpt, tokenizer="byte")
    loaded = gatedlm.Model.load(gguf)
    assert loaded.tokenizer is not None
    a, b = original.state_dict(), loaded.state_dict()
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    ids = loaded.tokenizer.encode("It was the best of times")
    np.testing.assert_array_equal(original.forward(ids)["logits"], loaded.forward(ids)["logits"])
