"""Activation hooks, caches and gradients (Model.run_with_hooks, run_with_cache, backward):
against the unhooked forward bit for bit, the PyTorch reference model (tests/reference/
reference_model.py) for head ablation, activation patching and activation gradients, and the
same weights without a gate for a gate clamped open."""
import json
import os
import sys

import numpy as np
import pytest

import gatedlm
from conftest import GATED

torch = pytest.importorskip("torch", reason="the PyTorch reference needs Debian's python3-torch")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reference"))
from reference_model import load_checkpoint  # noqa: E402

TOK = gatedlm.Tokenizer("byte")
IDS_A = np.array(TOK.encode("It was the best of times, it was the worst of times", bos=True)[:32], dtype=np.int64)
IDS_B = np.array(TOK.encode("it was the age of wisdom, it was the age of foolishness", bos=True)[:32], dtype=np.int64)


def test_identity_hooks_leave_the_logits_bit_identical(gated_checkpoint):
    model = gatedlm.Model.load(gated_checkpoint)
    names = model.hook_names()
    assert names[0] == "blocks.0.hook_resid_pre" and names[-1] == "hook_logits"
    assert "blocks.1.attn.hook_pattern" in names and "blocks.1.attn.hook_gate" in names
    base = model.forward(IDS_A)["logits"]
    seen = []
    hooks = {n: (lambda x, name: seen.append(name)) for n in names}
    np.testing.assert_array_equal(model.run_with_hooks(IDS_A, hooks), base)
    assert sorted(seen) == sorted(names)
    returning = {n: (lambda x, name: x) for n in names}
    np.testing.assert_array_equal(model.run_with_hooks(IDS_A, returning), base)
    batch = np.stack([IDS_A, IDS_B])
    logits, cache = model.run_with_cache(batch)
    np.testing.assert_array_equal(logits, model.forward(batch)["logits"])
    assert cache["blocks.0.attn.hook_pattern"].shape == (2, 4, 32, 32)
    assert cache["blocks.1.attn.hook_z"].shape == (2, 32, 4, 16)
    assert cache["blocks.1.attn.hook_k"].shape == (2, 32, 2, 16)
    assert cache["hook_logits"].shape == (2, 32, 258)
    np.testing.assert_allclose(cache["blocks.0.attn.hook_pattern"].sum(-1), 1.0, rtol=1e-5)


def test_bad_hook_names_and_results_are_refused(gated_checkpoint):
    model = gatedlm.Model.load(gated_checkpoint)
    with pytest.raises(ValueError, match="no hook point \"blocks.9.hook_resid_pre\""):
        model.run_with_hooks(IDS_A, {"blocks.9.hook_resid_pre": lambda x, n: None})
    with pytest.raises(TypeError, match="not callable"):
        model.run_with_hooks(IDS_A, {"blocks.0.hook_resid_pre": 3})
    with pytest.raises(ValueError, match="another shape"):
        model.run_with_hooks(IDS_A, {"blocks.0.hook_resid_pre": lambda x, n: x[:, :3]})
    with pytest.raises(ZeroDivisionError):
        model.run_with_hooks(IDS_A, {"blocks.0.hook_resid_pre": lambda x, n: 1 / 0})
    with pytest.raises(ValueError, match="no gradient"):
        model.backward(IDS_A, names=["blocks.0.attn.hook_pattern"])
    # The model still works after a hook raised.
    np.testing.assert_array_equal(model.run_with_hooks(IDS_A, {}), model.forward(IDS_A)["logits"])


def test_ablating_a_head_through_hook_z_is_zeroing_its_o_proj_columns(gated_checkpoint):
    model = gatedlm.Model.load(gated_checkpoint)
    layer, head, hd = 1, 2, GATED["head_dim"]

    def ablate(z, name):
        z[:, :, head, :] = 0

    got = model.run_with_hooks(IDS_A, {f"blocks.{layer}.attn.hook_z": ablate})
    ref = load_checkpoint(str(gated_checkpoint), dtype=torch.float64)
    with torch.no_grad():
        ref.model.layers[layer].self_attn.o_proj.weight[:, head * hd:(head + 1) * hd] = 0
        want = ref(torch.from_numpy(IDS_A[None]))[0].numpy()
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-4)
    assert np.abs(got - model.forward(IDS_A)["logits"]).max() > 1e-3


def test_clamping_the_g1_gate_open_is_the_model_without_a_gate(gated_checkpoint):
    gated = gatedlm.Model.load(gated_checkpoint)
    ungated_config = {k: v for k, v in gated.config.items() if k != "gate"}
    state = {k: v for k, v in gated.state_dict().items() if ".gate." not in k}
    ungated = gatedlm.Model.from_state_dict(ungated_config, state)
    hooks = {f"blocks.{l}.attn.hook_gate": (lambda s, name: np.ones_like(s)) for l in range(GATED["n_layers"])}
    np.testing.assert_allclose(gated.run_with_hooks(IDS_A, hooks), ungated.forward(IDS_A)["logits"], rtol=0, atol=1e-5)


def test_patching_the_residual_stream_from_another_prompt_matches_the_reference(gated_checkpoint):
    model = gatedlm.Model.load(gated_checkpoint)
    layer, pos, name = 1, 9, "blocks.1.hook_resid_pre"
    _, cache = model.run_with_cache(IDS_B, names=[name])

    def patch(x, n):
        x[:, pos] = cache[name][:, pos]

    got = model.run_with_hooks(IDS_A, {name: patch})
    ref = load_checkpoint(str(gated_checkpoint), dtype=torch.float64)
    block = ref.model.layers[layer]
    kept = {}

    def keep(mod, args):
        kept["x"] = args[0].clone()

    handle = block.register_forward_pre_hook(keep)
    with torch.no_grad():
        ref(torch.from_numpy(IDS_B[None]))
    handle.remove()

    def ref_patch(mod, args):
        x = args[0].clone()
        x[:, pos] = kept["x"][:, pos]
        return (x,) + args[1:]

    block.register_forward_pre_hook(ref_patch)
    with torch.no_grad():
        want = ref(torch.from_numpy(IDS_A[None]))[0].numpy()
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-4)
    # Positions before the patch see nothing of it (causal).
    np.testing.assert_array_equal(got[:pos], model.forward(IDS_A)["logits"][:pos])


def test_activation_gradients_match_pytorch_autograd_and_finite_differences(gated_checkpoint):
    model = gatedlm.Model.load(gated_checkpoint)
    names = ["blocks.0.hook_resid_pre", "blocks.1.hook_resid_pre", "blocks.1.hook_attn_out"]
    ids = np.stack([IDS_A, IDS_B])
    out = model.backward(ids, names=names, params=True)
    assert set(out["grads"]) == set(names)
    ref = load_checkpoint(str(gated_checkpoint), dtype=torch.float64)
    leaves = {}

    def make_leaf(i):
        def pre(mod, args):
            args[0].retain_grad()  # the block's input keeps its gradient
            leaves[i] = args[0]
        return pre

    for i, block in enumerate(ref.model.layers):
        block.register_forward_pre_hook(make_leaf(i))
    loss = ref.loss(torch.from_numpy(ids))
    loss.backward()
    assert out["loss"] == pytest.approx(loss.item(), rel=1e-5)
    for i in range(2):
        np.testing.assert_allclose(out["grads"][f"blocks.{i}.hook_resid_pre"], leaves[i].grad.numpy(),
                                   rtol=0, atol=2e-6)
    # The parameters' gradients: o_proj of layer 0 against autograd's.
    o_proj = "model.layers.0.self_attn.o_proj.weight"
    np.testing.assert_allclose(out["param_grads"][o_proj], ref.model.layers[0].self_attn.o_proj.weight.grad.numpy(),
                               rtol=0, atol=2e-6)
    # hook_attn_out by central differences (float32 forward: a loose tolerance).
    g = out["grads"]["blocks.1.hook_attn_out"]
    for (b, t, i) in [(0, 5, 3), (1, 20, 40), (0, 30, 7)]:
        def moved(by):
            def nudge(x, n):
                x[b, t, i] += by
            return model.backward(ids, hooks={"blocks.1.hook_attn_out": nudge})["loss"]
        numeric = (moved(1e-2) - moved(-1e-2)) / 2e-2
        assert g[b, t, i] == pytest.approx(numeric, rel=3e-2, abs=2e-5)


def test_the_gradient_of_one_logit(gated_checkpoint):
    model = gatedlm.Model.load(gated_checkpoint)
    out = model.backward(IDS_A, logit=(12, 101), names=["hook_logits", "blocks.0.hook_resid_pre"])
    assert out["logit"] == pytest.approx(float(model.forward(IDS_A)["logits"][12, 101]), rel=1e-6)
    seed = out["grads"]["hook_logits"][0]
    assert seed[12, 101] == 1 and seed.sum() == 1
    g = out["grads"]["blocks.0.hook_resid_pre"][0]
    assert np.abs(g[13:]).max() == 0 and np.abs(g[:13]).max() > 0  # later tokens cannot move position 12


def test_a_steering_vector_changes_generation_deterministically(gated_checkpoint):
    model = gatedlm.Model.load(gated_checkpoint, tokenizer="byte")
    target = TOK.encode("z")[0]
    params = model.params()
    direction = params.get("lm_head.weight", params["model.embed_tokens.weight"])[target].copy()
    last = f"blocks.{GATED['n_layers'] - 1}.hook_resid_post"

    def steer(x, name):
        x += 50.0 * direction / np.linalg.norm(direction)

    plain = model.generate("It was", max_tokens=12, seed=3, temperature=0)
    "".join(plain)
    plain_ids = plain.ids
    runs = []
    for _ in range(2):
        g = model.generate("It was", max_tokens=12, seed=3, temperature=0, hooks={last: steer})
        text = "".join(g)
        runs.append((text, g.ids))
    assert runs[0] == runs[1]
    assert runs[0][1] != plain_ids
    assert runs[0][1].count(target) >= 10


def test_hooks_on_a_hybrid_and_on_a_q4_0_model(gated_checkpoint, run_cli, tmp_path):
    cfg = dict(GATED, n_layers=4, full_attention_interval=4, norm_zero_centered=True, rope_dims=4,
               linear_attention={"n_k_heads": 2, "n_v_heads": 4, "k_head_dim": 8, "v_head_dim": 8})
    hybrid = gatedlm.Model.init(cfg, seed=5)
    names = hybrid.hook_names()
    for point in ("hook_beta", "hook_decay", "hook_out_gate", "hook_state"):
        assert f"blocks.0.linear_attn.{point}" in names
    assert "blocks.0.attn.hook_z" not in names and "blocks.3.attn.hook_z" in names
    base = hybrid.forward(IDS_A)["logits"]
    np.testing.assert_array_equal(hybrid.run_with_hooks(IDS_A, {n: (lambda x, m: x) for n in names}), base)
    _, cache = hybrid.run_with_cache(IDS_A, names=["blocks.1.linear_attn.hook_beta", "blocks.1.linear_attn.hook_state"])
    assert cache["blocks.1.linear_attn.hook_beta"].shape == (1, 32, 4)
    assert ((cache["blocks.1.linear_attn.hook_beta"] > 0) & (cache["blocks.1.linear_attn.hook_beta"] < 1)).all()
    assert cache["blocks.1.linear_attn.hook_state"].shape == (1, 4, 8, 8)
    silenced = hybrid.run_with_hooks(IDS_A, {"blocks.1.linear_attn.hook_beta": lambda b, n: np.zeros_like(b)})
    assert np.abs(silenced - base).max() > 1e-4
    grads = hybrid.backward(IDS_A, names=["blocks.1.hook_attn_out"])["grads"]
    assert np.isfinite(grads["blocks.1.hook_attn_out"]).all()

    q4 = tmp_path / "q4"
    run_cli("quantize", gated_checkpoint, "--type", "q4_0", "--out", q4)
    quantised = gatedlm.Model.load(q4)
    base = quantised.forward(IDS_A)["logits"]
    np.testing.assert_array_equal(quantised.run_with_hooks(IDS_A, {"blocks.0.attn.hook_z": lambda z, n: z}), base)
    ablated = quantised.run_with_hooks(IDS_A, {"blocks.0.attn.hook_z": lambda z, n: np.zeros_like(z)})
    assert np.abs(ablated - base).max() > 1e-3


def test_a_hook_that_calls_its_own_model_is_refused(gated_checkpoint):
    """The hook runs inside the model's forward (which holds its lock): a call back into the
    same model raises instead of waiting forever; another model may be called."""
    model = gatedlm.Model.load(gated_checkpoint)
    other = gatedlm.Model.load(gated_checkpoint)
    with pytest.raises(ValueError, match="cannot call its own model"):
        model.run_with_hooks(IDS_A, {"blocks.0.hook_resid_pre": lambda x, n: model.forward(IDS_A)})
    seen = []
    model.run_with_hooks(IDS_A, {"blocks.0.hook_resid_pre": lambda x, n: seen.append(other.forward(IDS_A[:4]))})
    assert len(seen) == 1
    np.testing.assert_array_equal(model.run_with_hooks(IDS_A, {}), model.forward(IDS_A)["logits"])
