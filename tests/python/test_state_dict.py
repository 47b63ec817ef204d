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


def test_non_finite_weights_are_refused_and_never_saved(gated_checkpoint, tmp_path):
    """Hardening, third round, row 6: from_state_dict took NaN arrays and save() then wrote
    a checkpoint that every loader refuses. The tensor is named; a model whose weights were
    set to NaN through its views afterwards cannot be saved either, and nothing is written."""
    model = gatedlm.Model.load(gated_checkpoint)
    state = {k: v.copy() for k, v in model.state_dict().items()}
    state["model.layers.1.mlp.down_proj.weight"][3, 5] = np.nan
    with pytest.raises(gatedlm.Error, match="model.layers.1.mlp.down_proj.weight"):
        gatedlm.Model.from_state_dict(model.config, state)
    model.params()["model.norm.weight"][0] = np.inf
    with pytest.raises(gatedlm.Error, match="model.norm.weight"):
        model.save(tmp_path / "bad")
    assert not (tmp_path / "bad").exists()


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


def test_load_reads_a_hybrid_gguf_file(run_cli, tmp_path):
    """Model.load on a hybrid GGUF (llama.cpp's qwen3next: Gated DeltaNet layers, MoE with a
    shared expert) gives the model it was exported from: the same parameters and logits (A_log
    and the zero-centred norms pass through -exp(A_log) and 1 + w in the file: float rounding)."""
    import json
    cfg = {"vocab_size": 258, "d_model": 32, "n_layers": 4, "n_heads": 2, "n_kv_heads": 1, "head_dim": 16,
           "rope_dims": 8, "ffn_hidden": 0, "max_seq_len": 64, "full_attention_interval": 2,
           "norm_zero_centered": True, "gate": {"position": "sdpa"},
           "linear_attention": {"n_k_heads": 2, "n_v_heads": 4, "k_head_dim": 8, "v_head_dim": 8},
           "moe": {"n_experts": 4, "top_k": 2, "expert_hidden": 16, "n_shared": 1}}
    config = tmp_path / "hybrid.json"
    config.write_text(json.dumps(cfg))
    ckpt = tmp_path / "hybrid_ckpt"
    run_cli("init", "--config", config, "--out", ckpt, "--seed", 4)
    run_cli("export", ckpt, "--format", "gguf", "--gguf-arch", "qwen3next", "--out", tmp_path / "gguf")
    original = gatedlm.Model.load(ckpt, tokenizer="byte")
    loaded = gatedlm.Model.load(tmp_path / "gguf" / "model.gguf")
    assert loaded.config == original.config
    a, b = original.state_dict(), loaded.state_dict()
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_allclose(b[name], a[name], rtol=0, atol=1e-6, err_msg=name)
    ids = loaded.tokenizer.encode("It was the best of times")
    np.testing.assert_allclose(loaded.forward(ids)["logits"], original.forward(ids)["logits"], rtol=1e-5, atol=1e-6)


def test_load_reads_a_quantised_checkpoint_as_score_does(gated_checkpoint, run_cli, tmp_path):
    """Model.load on a q4_0 checkpoint (refused before the one loader): the products run on its
    blocks, so its logits are those `gatedlm score` computes from the same directory, not the
    F32 model's."""
    import json
    q4 = tmp_path / "q4"
    run_cli("quantize", gated_checkpoint, "--type", "q4_0", "--out", q4)
    ids = [256, 72, 101, 108, 108, 111, 44, 32, 119]
    (tmp_path / "ids.txt").write_text(" ".join(map(str, ids)) + "\n")
    scored = json.loads(run_cli("score", "--checkpoint", q4, "--token-ids", tmp_path / "ids.txt", "--logprobs",
                                "--json").stdout.strip().splitlines()[-1])
    quantised = gatedlm.Model.load(q4)
    result = quantised.score([ids])
    assert result["mean_loss"] == pytest.approx(scored["mean_loss"], rel=1e-6)
    f32 = gatedlm.Model.load(gated_checkpoint)
    assert not np.array_equal(quantised.forward(ids)["logits"], f32.forward(ids)["logits"])


def test_gguf_files_load_in_parallel_threads(run_cli, tmp_path):
    """Two threads loading two GGUF files (each with a vocabulary) never meet: nothing goes
    through a scratch file (it once had a predictable name, and 1-3 of 80 loads failed)."""
    import json
    import threading
    cfg = {"vocab_size": 258, "d_model": 32, "n_layers": 2, "n_heads": 2, "n_kv_heads": 1, "head_dim": 16,
           "ffn_hidden": 64, "max_seq_len": 64}
    (tmp_path / "c.json").write_text(json.dumps(cfg))
    files = []
    for seed in (1, 2):
        run_cli("init", "--config", tmp_path / "c.json", "--out", tmp_path / f"ck{seed}", "--seed", seed)
        run_cli("export", tmp_path / f"ck{seed}", "--format", "gguf", "--out", tmp_path / f"g{seed}")
        files.append(tmp_path / f"g{seed}" / "model.gguf")
    errors = []

    def loads(path):
        for _ in range(10):
            try:
                assert gatedlm.Model.load(path).tokenizer is not None
            except Exception as e:  # noqa: BLE001 - every failure is the finding
                errors.append(repr(e))

    threads = [threading.Thread(target=loads, args=(f,)) for f in files]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_load_runs_a_q4_k_m_gguf_on_its_blocks(run_cli, tmp_path):
    """Model.load on a Q4_K_M GGUF file (a type per tensor, as llama-quantize picks them) runs
    its blocks: the mean loss `gatedlm score` gives for the file, and the logits of the
    checkpoint `gatedlm import` writes from it, which keeps the types."""
    import json
    cfg = {"vocab_size": 258, "d_model": 256, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "head_dim": 64,
           "ffn_hidden": 512, "max_seq_len": 64}
    config = tmp_path / "wide.json"
    config.write_text(json.dumps(cfg))
    run_cli("init", "--config", config, "--out", tmp_path / "ck", "--seed", 5)
    run_cli("export", tmp_path / "ck", "--format", "gguf", "--dtype", "q4_k_m", "--out", tmp_path / "gguf")
    gguf = tmp_path / "gguf" / "model.gguf"
    run_cli("import", gguf, "--out", tmp_path / "imported")
    ids = [256, 72, 101, 108, 108, 111, 44, 32, 119]
    (tmp_path / "ids.txt").write_text(" ".join(map(str, ids)) + "\n")
    scored = json.loads(run_cli("score", "--checkpoint", gguf, "--token-ids", tmp_path / "ids.txt",
                                "--json").stdout.strip().splitlines()[-1])
    from_file, imported = gatedlm.Model.load(gguf), gatedlm.Model.load(tmp_path / "imported")
    assert from_file.score([ids])["mean_loss"] == pytest.approx(scored["mean_loss"], rel=1e-6)
    np.testing.assert_array_equal(from_file.forward(ids)["logits"], imported.forward(ids)["logits"])
    f32 = gatedlm.Model.load(tmp_path / "ck", tokenizer="byte")
    assert not np.array_equal(from_file.forward(ids)["logits"], f32.forward(ids)["logits"])
