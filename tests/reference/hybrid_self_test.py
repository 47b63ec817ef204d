#!/usr/bin/python3
"""Checks of the hybrid reference itself (hybrid_reference.py), in float64; run by
self_test.py (test_against_engine.py --self-test) and on their own:

    /usr/bin/python3 tests/reference/hybrid_self_test.py

1. chunked delta rule == recurrence: several chunk sizes, lengths that are not a multiple of
   the chunk, n_v = n_k and n_v = 2 n_k, with and without an initial state (outputs and
   final state), and the gradients of both forms agree;
2. torch.autograd.gradcheck of a tiny Gated DeltaNet layer (all inputs and parameters), in
   the chunked and the recurrent form;
3. whole hybrid models: chunked == recurrent, causality, the layer pattern of
   full_attention_interval, zero-centred norms == plain norms with weights 1 + w, and the
   config checks (unknown keys, n_v not a multiple of n_k, both pattern keys, length).
"""

import copy
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import hybrid_reference as hyb  # noqa: E402
from reference_model import ConfigError, GatedLM, ModelConfig  # noqa: E402

_failures = []


def check(cond, what):
    if not cond:
        _failures.append(what)
        print(f"  FAIL: {what}")
    return cond


def rel(a, b):
    return float((a - b).norm() / max(float(b.norm()), 1e-300))


def random_rule_inputs(gen, B, T, n_k, n_v, dk, dv, requires_grad=False):
    """q, k L2-normalised (q scaled), v, g in about [-1.2, -0.02], beta in (0, 1), a state."""
    def r(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64)
    q = hyb.l2_normalize(r(B, T, n_k, dk)) / dk ** 0.5
    k = hyb.l2_normalize(r(B, T, n_k, dk))
    v = r(B, T, n_v, dv)
    g = -torch.exp(r(B, T, n_v) * 0.7 - 1.5)
    beta = torch.sigmoid(r(B, T, n_v))
    state = r(B, n_v, dk, dv) * 0.3
    xs = [q, k, v, g, beta, state]
    return [x.requires_grad_(requires_grad) for x in xs]


def test_chunked_vs_recurrent():
    print("[delta rule: chunked (WY/UT) vs recurrence, float64]")
    gen = torch.Generator().manual_seed(1)
    worst = 0.0
    for n_k, n_v in ((2, 2), (2, 4), (1, 3)):
        for T in (1, 5, 16, 37, 100):
            for C in (1, 4, 16, 64):
                q, k, v, g, beta, s0 = random_rule_inputs(gen, 2, T, n_k, n_v, 6, 5)
                for state in (None, s0):
                    o_r, s_r = hyb.delta_rule_recurrent(q, k, v, g, beta, state)
                    o_c, s_c = hyb.delta_rule_chunked(q, k, v, g, beta, C, state)
                    e = max(rel(o_c, o_r), rel(s_c, s_r))
                    worst = max(worst, e)
                    check(e < 1e-12, f"n_k {n_k} n_v {n_v} T {T} chunk {C} state {state is not None}: {e:.1e}")
    print(f"  worst relative difference (outputs, final states): {worst:.1e}")
    # the gradients of the two forms agree (T = 37 with chunks of 16: a partial last chunk)
    q, k, v, g, beta, s0 = random_rule_inputs(gen, 2, 37, 2, 4, 6, 5, requires_grad=True)
    w = torch.randn(2, 37, 4, 5, generator=gen, dtype=torch.float64)
    grads = []
    for form in (lambda: hyb.delta_rule_recurrent(q, k, v, g, beta, s0),
                 lambda: hyb.delta_rule_chunked(q, k, v, g, beta, 16, s0)):
        o, s = form()
        grads.append(torch.autograd.grad((o * w).sum() + s.pow(2).sum(), (q, k, v, g, beta, s0)))
    e = max(rel(a, b) for a, b in zip(*grads))
    check(e < 1e-11, f"gradients chunked vs recurrent: {e:.1e}")
    print(f"  gradients of q, k, v, g, beta, state: chunked vs recurrent {e:.1e}")
    # the state really carries: a different initial state changes every output
    o0, _ = hyb.delta_rule_chunked(q, k, v, g, beta, 16, None)
    o1, _ = hyb.delta_rule_chunked(q, k, v, g, beta, 16, s0)
    check(bool(((o0 - o1).abs().amax(dim=(0, 2, 3)) > 0).all()), "initial state reaches every position")


def _tiny_layer_config(n_k, n_v, **over):
    return ModelConfig.from_json(dict(vocab_size=11, d_model=6, n_layers=1, n_heads=2, n_kv_heads=1,
                                      head_dim=4, ffn_hidden=8, max_seq_len=16,
                                      layer_types=["linear_attention"],
                                      linear_attention={"n_k_heads": n_k, "n_v_heads": n_v,
                                                        "k_head_dim": 3, "v_head_dim": 2,
                                                        "conv_kernel": 3}, **over))


def test_gradcheck():
    print("[torch.autograd.gradcheck of a tiny Gated DeltaNet layer, float64]")
    for n_k, n_v, chunk in ((1, 2, 4), (2, 2, None), (1, 2, None)):
        model = GatedLM(_tiny_layer_config(n_k, n_v)).to(torch.float64)
        gen = torch.Generator().manual_seed(5)
        layer = model.model.layers[0].linear_attn
        layer.chunk_size = chunk
        names = [n for n, _ in layer.named_parameters()]
        with torch.no_grad():
            for _, p in layer.named_parameters():
                p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64) * 0.5)
        params = [p.detach().clone().requires_grad_(True) for p in layer.parameters()]
        h = torch.randn(2, 7, 6, generator=gen, dtype=torch.float64, requires_grad=True)

        def fn(h, *ps):
            mod = copy.deepcopy(layer)
            for name, p in zip(names, ps):
                owner = mod
                *path, last = name.split(".")
                for part in path:
                    owner = getattr(owner, part)
                delattr(owner, last)
                setattr(owner, last, p)   # a plain tensor: autograd reaches the inputs
            return mod(h)

        ok = torch.autograd.gradcheck(fn, (h, *params), eps=1e-6, atol=1e-8, rtol=1e-6,
                                      raise_exception=False)
        check(ok, f"gradcheck n_k {n_k} n_v {n_v} chunk {chunk}")
        print(f"  n_k {n_k} n_v {n_v} {'chunk ' + str(chunk) if chunk else 'recurrent'}: "
              f"{'ok' if ok else 'FAILED'} ({len(params)} parameters + input)")


def _hybrid_model(seed=3, **over):
    cfg = dict(vocab_size=31, d_model=16, n_layers=4, n_heads=2, n_kv_heads=1, head_dim=8,
               ffn_hidden=24, max_seq_len=96, full_attention_interval=2,
               linear_attention={"n_k_heads": 2, "n_v_heads": 4, "k_head_dim": 4, "v_head_dim": 4,
                                 "conv_kernel": 4})
    cfg.update(over)
    m = GatedLM(ModelConfig.from_json(cfg)).to(torch.float64)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, p in m.named_parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64) * (0.3 if p.ndim >= 2 else 0.1)
                    + (0 if p.ndim >= 2 else 1))
    hyb.randomize_for_tests(m, gen)
    return m


def test_models():
    print("[hybrid models]")
    tokens = torch.randint(0, 31, (2, 80), generator=torch.Generator().manual_seed(2))
    m = _hybrid_model()
    kinds = ["linear" if hasattr(layer, "linear_attn") else "full" for layer in m.model.layers]
    check(kinds == ["linear", "full", "linear", "full"], f"full_attention_interval 2 pattern {kinds}")
    chunked = m(tokens)
    hyb.set_chunk_size(m, None)
    recurrent = m(tokens)
    hyb.set_chunk_size(m, 7)
    e = max(rel(chunked, recurrent), rel(m(tokens), recurrent))
    check(e < 1e-12, f"model: chunked == recurrent ({e:.1e})")
    print(f"  model logits, chunk 64 and 7 vs recurrence: {e:.1e}")
    t2 = tokens.clone()
    t2[:, 50] = (t2[:, 50] + 1) % 31
    a, b = m(tokens), m(t2)
    check(torch.equal(a[:, :50], b[:, :50]) and not torch.allclose(a[:, 50:], b[:, 50:]), "causal")
    # zero-centred norms == plain norms whose weights are 1 + w (the gated norm excepted)
    zc = _hybrid_model(seed=4, norm_zero_centered=True)
    plain = _hybrid_model(seed=4)
    with torch.no_grad():
        for (n, p), (_, q) in zip(zc.named_parameters(), plain.named_parameters()):
            q.copy_(1.0 + p if hyb.is_block_norm(n) else p)
    e = rel(zc(tokens), plain(tokens))
    check(e < 1e-13, f"zero-centred norms == plain norms with 1 + w ({e:.1e})")
    init = GatedLM(ModelConfig.from_json({**_tiny_cfg_json(), "norm_zero_centered": True}))
    vectors = {n: p for n, p in init.named_parameters() if p.ndim == 1}
    check(all(float(p.abs().max()) == 0 for n, p in vectors.items() if hyb.is_block_norm(n))
          and all(float((p - 1).abs().max()) == 0 for n, p in vectors.items() if n.endswith("linear_attn.norm.weight")),
          "zero-centred init: block norms 0, the gated norm 1")


def _tiny_cfg_json():
    return dict(vocab_size=11, d_model=6, n_layers=2, n_heads=2, n_kv_heads=1, head_dim=4, ffn_hidden=8,
                max_seq_len=16, full_attention_interval=2,
                linear_attention={"n_k_heads": 1, "n_v_heads": 2, "k_head_dim": 3, "v_head_dim": 2})


def test_config():
    print("[hybrid config checks]")
    good = _tiny_cfg_json()
    c = ModelConfig.from_json(good)
    check(c.linear_attention.conv_kernel == 4 and not c.norm_zero_centered, "defaults: conv 4, plain norms")
    la = good["linear_attention"]
    bad = {
        "both pattern keys": {**good, "layer_types": ["linear_attention", "full_attention"]},
        "layer_types length": {k: v for k, v in {**good, "layer_types": ["linear_attention"]}.items()
                               if k != "full_attention_interval"},
        "layer type name": {k: v for k, v in {**good, "layer_types": ["linear", "full_attention"]}.items()
                            if k != "full_attention_interval"},
        "interval 0": {**good, "full_attention_interval": 0},
        "n_v not a multiple of n_k": {**good, "linear_attention": {**la, "n_k_heads": 2, "n_v_heads": 3}},
        "unknown linear_attention key": {**good, "linear_attention": {**la, "heads": 2}},
        "missing linear_attention": {k: v for k, v in good.items() if k != "linear_attention"},
        "norm_zero_centered not a bool": {**good, "norm_zero_centered": 1},
    }
    for what, d in bad.items():
        try:
            ModelConfig.from_json(d)
            check(False, f"config rejects {what}")
        except ConfigError:
            pass
    check(hyb.engine_lacks_hybrid('config.json: unknown key "layer_types"') == "layer_types"
          and hyb.engine_lacks_hybrid('config.json: unknown key "gate"') is None,
          "engine_lacks_hybrid recognises only the hybrid keys")


def main():
    torch.set_num_threads(1)
    test_chunked_vs_recurrent()
    test_gradcheck()
    test_models()
    test_config()
    print(f"hybrid self-test: {len(_failures)} failure(s)")
    return 1 if _failures else 0


if __name__ == "__main__":
    sys.exit(main())
