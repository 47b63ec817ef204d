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
