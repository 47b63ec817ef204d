"""Captured attention, gate scores and hidden states against the PyTorch reference model
(tests/reference/reference_model.py) on the same weights."""
import os
import sys

import numpy as np
import pytest

import gatedlm

torch = pytest.importorskip("torch", reason="the PyTorch reference needs Debian's python3-torch")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reference"))
from reference_model import load_checkpoint  # noqa: E402


def test_captures_equal_pytorch_reference(gated_checkpoint):
    tok = gatedlm.Tokenizer("byte")
    ids = np.array([tok.encode("It was the best of times, it was the worst of times", bos=True)[:40],
                    tok.encode("it was the age of wisdom, it was the age of foolishness", bos=True)[:40]],
                   dtype=np.int64)
    model = gatedlm.Model.load(gated_checkpoint)
    out = model.forward(ids, capture=["attention", "gate_scores", "hidden_states", "pre_gate"])

    ref = load_checkpoint(str(gated_checkpoint), dtype=torch.float64)
    trace = {}
    with torch.no_grad():
        logits = ref(torch.from_numpy(ids), trace=trace)
    np.testing.assert_allclose(out["logits"], logits.numpy(), rtol=0, atol=2e-4)
    B, T = ids.shape
    for layer in range(model.config["n_layers"]):
        p = f"layers.{layer}."
        np.testing.assert_allclose(out["attention"][:, layer], trace[p + "attn_probs"].numpy(), rtol=0, atol=2e-5)
        np.testing.assert_allclose(out["gate_scores"][:, layer], trace[p + "gate_score"].reshape(B, T, -1).numpy(),
                                   rtol=0, atol=2e-5)
        np.testing.assert_allclose(out["pre_gate"][:, layer], trace[p + "sdpa_out"].reshape(B, T, -1).numpy(),
                                   rtol=0, atol=2e-5)
        np.testing.assert_allclose(out["hidden_states"][:, layer], trace[p + "residual"].numpy(), rtol=0, atol=2e-4)
