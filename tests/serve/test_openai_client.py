#!/usr/bin/python3
"""`gatedlm serve`'s /v1/chat/completions driven by the official OpenAI JavaScript client.

npm `openai` (pinned below; it has no dependencies and uses node's fetch) is fetched once
with `npm pack` into ~/.cache/gatedlm/openai ($GATEDLM_CACHE), as the reference tests fetch
their packages. The server runs a small random checkpoint with the byte tokenizer and the
Qwen3-like template of test_server.py; tests/serve/openai_chat.mjs makes the calls: chat,
streaming chat, a stop string, an error. Exits 77 (ctest: skipped), with the reason, when
npm, node or the registry is unavailable.

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
    try:
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
            p = subprocess.run(["node", os.path.join(HERE, "openai_chat.mjs"), package,
                                f"http://127.0.0.1:{server.port}/v1"], timeout=180)
        finally:
            server.stop(signal.SIGKILL)
        return 0 if p.returncode == 0 else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
