#!/usr/bin/python3
"""`gatedlm serve`'s /v1/chat/completions driven by the official OpenAI JavaScript client.

npm `openai` (pinned below; it has no dependencies and uses node's fetch) is fetched once
with `npm pack` into ~/.cache/gatedlm/openai ($GATEDLM_CACHE), as the reference tests fetch
their packages. The server runs a small random checkpoint with the byte tokenizer and the
Qwen3-like template of test_server.py; tests/serve/openai_chat.mjs makes the calls: chat,
streaming chat, a stop string, an error. Exits 77 (ctest: skipped), with the reason, when
npm, node or the registry is unavailable.

A tool call (tests/serve/openai_tool_call.mjs) needs a model that emits Qwen3's
<tool_call> block, and a random one never does. So the test trains one, in the background
while the checks above run: a 107k-parameter byte-level model (2 layers, full attention)
memorises one document, the template's rendering of the test conversation (the get_weather
tool, a user question; 240 bytes) followed by the answer `<tool_call>\n{"name":
"get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n` and EOS (the byte
tokenizer's end of turn). 150 AdamW steps of 2 windows of 448 tokens, longer than the
document, so the answer is learnt after its whole prompt as it is served (models trained on
64-token windows learnt the text but did not carry it over to the long prompt), on one
thread (OMP_NUM_THREADS=1: two threads were several times slower on a busy 2-core host):
about 5 CPU-seconds; the whole test takes about 16 s where it took 2. Greedy decoding
(temperature 0) then reproduces the answer. That is checked first through /v1/completions
on the prompt's bytes, so a model that did not learn it fails as that and not as a server
bug; 150 steps learnt it for each of the 8 seeds tried (80 steps already did for 5 of 5),
and the seed is fixed. Cheaper ways were weighed: no trained checkpoint may be committed or
downloaded, and a hand-built model that spells a fixed string would be more code than this
training. Through the client: message.tool_calls (the name, the arguments parsed equal to
the model's), content null and finish_reason "tool_calls" (as OpenAI specifies), the stream
reassembled by hand from delta.tool_calls and by the client's chat.completions.stream()
helper, and a follow-up turn carrying the assistant's tool_calls message and a role "tool"
message with its tool_call_id (answered 200, its prompt the length of the rendering
written here by hand).

Usage: /usr/bin/python3 tests/serve/test_openai_client.py --gatedlm build/gatedlm
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
from npm_package import npm_package  # noqa: E402
from test_server import CHAT_TEMPLATE, CONFIG, Server  # noqa: E402

SKIP = 77
PACKAGE = "openai@5.23.2"

# The tool-call model: what it is offered, asked and taught to answer.
TOOL = {"type": "function", "function": {"name": "get_weather",
                                        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
QUESTION = "Weather in Paris?"
CALL = {"name": "get_weather", "arguments": {"city": "Paris"}}
TOOL_RESULT = '{"temperature_c": 21}'
TOOL_MODEL = dict(vocab_size=258, d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=16, ffn_hidden=128,
                  max_seq_len=512)
TRAIN_ARGS = ["--steps", "150", "--batch-size", "2", "--seq-len", "448", "--lr", "0.01", "--min-lr", "0.001",
              "--warmup", "10", "--weight-decay", "0", "--seed", "1", "--eval-every", "0", "--save-every", "0"]


def rendered(turns):
    """CHAT_TEMPLATE's rendering with TOOL offered (no system message), by hand."""
    text = "<|im_start|>system\n# Tools\n" + json.dumps(TOOL, ensure_ascii=False) + "<|im_end|>\n"
    for role, content in turns:
        text += f"<|im_start|>{role}\n{content}<|im_end|>\n"
    return text + "<|im_start|>assistant\n"


PROMPT = rendered([("user", QUESTION)])
ANSWER = "<tool_call>\n" + json.dumps(CALL) + "\n</tool_call>\n"
# The follow-up: the assistant turn that only called the tool renders its content, "".
FOLLOW_UP = rendered([("user", QUESTION), ("assistant", ""), ("tool", TOOL_RESULT)])


def start_training(binary, work):
    """Starts training the tool-call model in the background; returns the process and the run.

    Each of 4 files holds the document twice. The document ends with a newline (after
    </tool_call>: whitespace the server drops), and --val-fraction 0.5 cuts each file just
    after the first copy's (data prepare cuts at the newline nearest the fraction), so
    training sees 4 documents "PROMPT ANSWER" each followed by EOS, validation the same."""
    text_dir = os.path.join(work, "tool_text")
    os.makedirs(text_dir)
    doc = PROMPT + ANSWER
    for i in range(4):
        with open(os.path.join(text_dir, f"{i}.txt"), "w") as f:
            f.write(doc + doc)
    with open(os.path.join(work, "tool_model.json"), "w") as f:
        json.dump(TOOL_MODEL, f)
    data, run = os.path.join(work, "tool_data"), os.path.join(work, "tool_run")
    subprocess.run([binary, "data", "prepare", "--tokenizer", "byte", "--input", text_dir, "--out", data,
                    "--val-fraction", "0.5"], check=True, stdout=subprocess.DEVNULL)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    p = subprocess.Popen([binary, "train", "--config", os.path.join(work, "tool_model.json"), "--data", data,
                          "--out", run, *TRAIN_ARGS], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return p, run


def run_node(script, package, server, *extra):
    return subprocess.run(["node", os.path.join(HERE, script), package, f"http://127.0.0.1:{server.port}/v1", *extra],
                          timeout=180).returncode


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gatedlm", required=True)
    args = ap.parse_args()
    package, why = npm_package(PACKAGE, "openai")
    if package is None:
        print("skipped: " + why)
        return SKIP
    binary = os.path.abspath(args.gatedlm)
    work = tempfile.mkdtemp(prefix="gatedlm_openai_")
    trainer = None
    try:
        trainer, run = start_training(binary, work)
        with open(os.path.join(work, "config.json"), "w") as f:
            json.dump(CONFIG, f)
        ckpt = os.path.join(work, "ck")
        subprocess.run([binary, "init", "--config", os.path.join(work, "config.json"), "--out", ckpt, "--seed", "5"],
                       check=True, stdout=subprocess.DEVNULL)
        template = os.path.join(work, "chat.jinja")
        with open(template, "w") as f:
            f.write(CHAT_TEMPLATE)
        server = Server(binary, ckpt, work, "--context", "2048", "--chat-template", template)
        try:
            chat_rc = run_node("openai_chat.mjs", package, server)
        finally:
            server.stop(signal.SIGKILL)

        _, err = trainer.communicate(timeout=600)
        if trainer.returncode != 0:
            print("FAIL  training the tool-call model:\n" + err.decode(errors="replace"))
            return 1
        with open(os.path.join(run, "latest")) as f:
            tool_ckpt = os.path.join(run, "checkpoints", f.read().strip())
        server = Server(binary, tool_ckpt, work, "--context", "512", "--chat-template", template)
        try:
            st, j, _ = server.request("POST", "/v1/completions", {"prompt": list(PROMPT.encode()), "temperature": 0,
                                                                  "max_tokens": len(ANSWER) + 8})
            got = j["choices"][0]["text"] if st == 200 else None
            learnt = st == 200 and got == ANSWER and j["choices"][0]["finish_reason"] == "stop"
            print(("ok    " if learnt else "FAIL  ") +
                  f"the tool-call model continues its prompt greedily with its answer and EOS ({got!r})")
            spec = {"tool": TOOL, "question": QUESTION, "call": CALL, "tool_result": TOOL_RESULT,
                    "prompt_tokens": len(PROMPT.encode()), "follow_up_prompt_tokens": len(FOLLOW_UP.encode())}
            tool_rc = run_node("openai_tool_call.mjs", package, server, json.dumps(spec)) if learnt else 1
        finally:
            server.stop(signal.SIGKILL)
        return 0 if chat_rc == 0 and tool_rc == 0 else 1
    finally:
        if trainer is not None and trainer.poll() is None:
            trainer.kill()
            trainer.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
