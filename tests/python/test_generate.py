"""Model.generate against `gatedlm generate --json` with the same seed."""
import json

import gatedlm


def test_generate_equals_cli(gated_checkpoint, run_cli):
    args = dict(max_tokens=24, temperature=0.9, top_k=40, top_p=0.95, seed=11)
    cli = json.loads(run_cli("generate", "--checkpoint", gated_checkpoint, "--tokenizer", "byte", "--prompt",
                             "it was the", "--max-tokens", 24, "--temperature", 0.9, "--top-k", 40, "--top-p", 0.95,
                             "--seed", 11, "--json").stdout)
    model = gatedlm.Model.load(gated_checkpoint, tokenizer="byte")
    gen = model.generate("it was the", **args)
    pieces = list(gen)
    assert gen.ids == cli["ids"]
    assert gen.prompt_ids == cli["prompt_ids"]
    assert "".join(pieces) == gen.text
    if "\ufffd" not in gen.text:  # an untrained byte model may emit invalid UTF-8, replaced by both
        assert gen.text == cli["text"]
    assert gen.finish_reason == cli["finish_reason"]


def test_generate_stops_at_context_and_stop_string(gated_checkpoint):
    model = gatedlm.Model.load(gated_checkpoint)
    gen = model.generate("x" * 60, max_tokens=50, temperature=0, tokenizer=gatedlm.Tokenizer("byte"))
    list(gen)
    assert gen.finish_reason == "context" and len(gen.ids) == 64 - 61


def test_fields_read_while_another_thread_generates(gated_checkpoint):
    """Hardening, third round, row 9: text and ids were read without the model's lock while
    __next__ updated them in another thread. Read them all the while; every snapshot is a
    prefix of the final result (ids and text only grow), and the reader never crashes. (The
    race itself shows under ThreadSanitizer: docs/robustness.md.)"""
    import threading

    model = gatedlm.Model.load(gated_checkpoint, tokenizer="byte")
    for attempt in range(3):
        gen = model.generate("it was the", max_tokens=40, temperature=0.8, seed=attempt)
        seen, done = [], threading.Event()

        def read():
            while not done.is_set():
                seen.append((list(gen.ids), gen.text, gen.finish_reason))

        reader = threading.Thread(target=read)
        reader.start()
        list(gen)
        done.set()
        reader.join()
        assert seen, "the reader ran"
        for ids, text, reason in seen:
            assert gen.ids[:len(ids)] == ids
            assert reason in ("", gen.finish_reason)


def test_an_f16_cache_generates_as_the_cli_does(gated_checkpoint, run_cli):
    """kv_type="f16" keeps the KV rows in F16, as `generate --kv-type f16`: the same greedy
    ids from both; a type the cache does not take is a gatedlm.Error naming it."""
    cli = json.loads(run_cli("generate", "--checkpoint", gated_checkpoint, "--tokenizer", "byte", "--prompt",
                             "it was the", "--max-tokens", 16, "--temperature", 0, "--kv-type", "f16",
                             "--json").stdout)
    model = gatedlm.Model.load(gated_checkpoint, tokenizer="byte")
    gen = model.generate("it was the", max_tokens=16, temperature=0, kv_type="f16")
    list(gen)
    assert gen.ids == cli["ids"] and len(gen.ids) == 16
    try:
        model.generate("it was the", kv_type="q4_0")
    except gatedlm.Error as e:
        assert "kv_type" in str(e) and "q4_0" in str(e)
    else:
        raise AssertionError("kv_type='q4_0' was taken")


def test_a_q8_cache_generates_as_the_cli_does(work, gated_config, gated_checkpoint, run_cli):
    """kv_type="q8_0" keeps the KV rows in Q8_0 blocks, as `generate --kv-type q8_0`: the same
    greedy ids from both on a model whose head_dim (32) is whole blocks; a head_dim of 16 is
    refused naming it."""
    config = json.loads(gated_config.read_text())
    config["head_dim"] = 32
    (work / "gated_hd32.json").write_text(json.dumps(config))
    checkpoint = work / "gated_hd32_ckpt"
    run_cli("init", "--config", work / "gated_hd32.json", "--out", checkpoint, "--seed", 7)
    cli = json.loads(run_cli("generate", "--checkpoint", checkpoint, "--tokenizer", "byte", "--prompt",
                             "it was the", "--max-tokens", 16, "--temperature", 0, "--kv-type", "q8_0",
                             "--json").stdout)
    gen = gatedlm.Model.load(checkpoint, tokenizer="byte").generate("it was the", max_tokens=16, temperature=0,
                                                                     kv_type="q8_0")
    list(gen)
    assert gen.ids == cli["ids"] and len(gen.ids) == 16
    try:
        list(gatedlm.Model.load(gated_checkpoint, tokenizer="byte").generate("it was the", kv_type="q8_0"))
    except gatedlm.Error as e:
        assert "head_dim" in str(e) and "16" in str(e)
    else:
        raise AssertionError("q8_0 rows of head_dim 16 were taken")
