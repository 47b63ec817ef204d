"""Model.load / forward / score / analyze against the command line on the same checkpoint."""
import json
import math
import threading

import numpy as np
import pytest

import gatedlm
from conftest import GATED


def ids_of(text, n):
    tok = gatedlm.Tokenizer("byte")
    return tok.encode(text, bos=True)[:n]


def test_score_equals_cli_score(gated_checkpoint, work, run_cli):
    seqs = [ids_of("the age of wisdom and of foolishness", 30), ids_of("it was the epoch of belief", 12)]
    ids_file = work / "score_ids.txt"
    ids_file.write_text("\n".join(" ".join(map(str, s)) for s in seqs) + "\n")
    cli = json.loads(run_cli("score", "--checkpoint", gated_checkpoint, "--token-ids", ids_file, "--json",
                             "--logprobs").stdout)
    model = gatedlm.Model.load(gated_checkpoint)
    py = model.score(seqs)
    assert py == cli  # the same function computes both: equal to the last bit


def test_forward_logits_give_cli_logprobs(gated_checkpoint, work, run_cli):
    seq = ids_of("it was the best of times, it was the worst of times", 40)
    ids_file = work / "forward_ids.txt"
    ids_file.write_text(" ".join(map(str, seq)) + "\n")
    cli = json.loads(run_cli("score", "--checkpoint", gated_checkpoint, "--token-ids", ids_file, "--json",
                             "--logprobs").stdout)
    model = gatedlm.Model.load(gated_checkpoint)
    logits = model.forward(np.array(seq, dtype=np.int64))["logits"].astype(np.float64)
    assert logits.shape == (len(seq), 258)
    shifted = logits - logits.max(axis=1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    mine = [logp[t, seq[t + 1]] for t in range(len(seq) - 1)]
    np.testing.assert_allclose(mine, cli["logprobs"][0], rtol=0, atol=2e-5)


def test_batched_forward_equals_rows(gated_checkpoint):
    model = gatedlm.Model.load(gated_checkpoint)
    a, b = ids_of("it was the age of wisdom", 20), ids_of("the epoch of incredulity!", 20)
    both = model.forward(np.array([a, b], dtype=np.int32), capture=["hidden_states", "gate_scores"])
    for row, ids in enumerate((a, b)):
        one = model.forward(ids, capture=["hidden_states", "gate_scores"])
        for key in ("logits", "hidden_states", "gate_scores"):
            np.testing.assert_allclose(both[key][row], one[key], rtol=0, atol=1e-5)


def test_capture_shapes_and_window(gated_checkpoint):
    model = gatedlm.Model.load(gated_checkpoint)
    ids = ids_of("it was the best of times, it was the worst", 24)
    out = model.forward(ids, capture=["attention", "gate_scores", "pre_gate", "post_gate", "sdpa_out",
                                      "hidden_states"])
    L, H, T = 2, 4, len(ids)
    assert out["attention"].shape == (L, H, T, T)
    np.testing.assert_allclose(out["attention"].sum(axis=-1), 1.0, atol=1e-5)
    assert np.all(np.triu(out["attention"][0, 0], k=1) == 0)  # causal
    assert out["gate_scores"].shape == (L, T, H * 16)
    assert out["hidden_states"].shape == (L, T, 64)
    np.testing.assert_allclose(out["post_gate"], out["pre_gate"] * out["gate_scores"], rtol=1e-5, atol=1e-6)
    window = model.forward(ids, capture=["attention"], attention_window=(4, 10))["attention"]
    assert window.shape == (L, H, 6, 10)
    np.testing.assert_array_equal(window, out["attention"][:, :, 4:10, :10])


def test_analyze_equals_cli_analyze(gated_checkpoint, text_file, work, run_cli):
    out = work / "analysis.json"
    run_cli("analyze", "--checkpoint", gated_checkpoint, "--text", text_file, "--tokenizer", "byte",
            "--sequences", 3, "--seq-len", 32, "--seed", 5, "--out", out, "--quiet")
    cli = json.loads(out.read_text())
    model = gatedlm.Model.load(gated_checkpoint)
    py = model.analyze(text_file.read_text(), "byte", sequences=3, seq_len=32, seed=5)
    for key in ("source", "checkpoint", "elapsed_s", "seconds"):
        cli.pop(key, None)
        py.pop(key, None)
    assert py == cli


def test_two_threads_forward_on_two_models(gated_checkpoint, work, run_cli):
    other = work / "other_ckpt"
    run_cli("init", "--config", gated_checkpoint / "config.json", "--out", other, "--seed", 99)
    models = [gatedlm.Model.load(gated_checkpoint), gatedlm.Model.load(other)]
    ids = np.array([ids_of("it was the season of light, it was the season of darkness", 48)] * 2, dtype=np.int32)
    expected = [m.forward(ids)["logits"] for m in models]
    results = [None, None]

    def work_on(i):
        for _ in range(5):
            results[i] = models[i].forward(ids)["logits"]

    threads = [threading.Thread(target=work_on, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for got, want in zip(results, expected):
        np.testing.assert_array_equal(got, want)


def test_hybrid_model_captures_nan_for_linear_layers(run_cli, work):
    """A hybrid (Gated DeltaNet layers, then a gated softmax layer): the softmax layer's
    captures are real, the linear layers' attention / gate / SDPA entries NaN, never a crash."""
    import json
    cfg = dict(GATED, n_layers=4, full_attention_interval=4, norm_zero_centered=True, rope_dims=4,
               linear_attention={"n_k_heads": 2, "n_v_heads": 4, "k_head_dim": 8, "v_head_dim": 8})
    path = work / "hybrid.json"
    path.write_text(json.dumps(cfg))
    model = gatedlm.Model.init(str(path), seed=5)
    ids = list(range(1, 21))
    out = model.forward(ids, capture=["attention", "gate_scores", "sdpa_out", "hidden_states"])
    for name in ("attention", "gate_scores", "sdpa_out"):
        assert np.isnan(out[name][:3]).all(), name
        assert np.isfinite(out[name][3]).all(), name
    assert np.isfinite(out["hidden_states"]).all()
    rows = out["attention"][3].sum(axis=-1)
    np.testing.assert_allclose(rows, 1.0, rtol=1e-5)
    logits = out["logits"]
    logp = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)) - logits.max(-1, keepdims=True)
    want = -np.mean([logp[t, ids[t + 1]] for t in range(len(ids) - 1)])
    assert abs(model.score(ids)["mean_loss"] - want) < 1e-4
