#!/usr/bin/python3
"""Bounded load test of `gatedlm serve`, loopback only: starts the server on a free port,
sends --requests completions, --concurrency at a time, then stops it (SIGTERM) and exits.

Reports throughput (requests/s and completion tokens/s), latency p50/p99, failed
requests, and the server's RSS before the first request and after the last.

Usage: /usr/bin/python3 bench/load_test.py --checkpoint CK [--tokenizer byte] [--gatedlm build/gatedlm]
          [--requests 500] [--concurrency 16] [--max-tokens 32] [--max-batch 16]
          [--chat [--chat-template FILE]]
With no --checkpoint, a random model from bench/configs/qwen3_100m.json is made (slow to
generate with, but a fair load); any small checkpoint also works (e.g. the demo's).
--chat sends each request to /v1/chat/completions as a four-message conversation (system,
user, assistant, user) instead, rendered by the model's chat template, or by --chat-template
FILE; with neither (the random model has none) a ChatML template of the script's own."""
import argparse
import http.client
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def start_server(gatedlm, ck, tokenizer, work, *extra):
    """Starts `gatedlm serve` on a free loopback port; returns (process, port, log path)."""
    log_path = os.path.join(work, "serve.log")
    log = open(log_path, "w")
    proc = subprocess.Popen([gatedlm, "serve", "--checkpoint", ck, "--tokenizer", tokenizer, "--host", "127.0.0.1",
                             "--port", "0", *extra], stdout=log, stderr=log)
    for _ in range(600):
        time.sleep(0.1)
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", open(log_path).read())
        if m:
            return proc, int(m.group(1)), log_path
        if proc.poll() is not None:
            break
    proc.kill()
    sys.exit("the server did not start:\n" + open(log_path).read())


# For --chat on a model without a template of its own: ChatML, as Qwen's templates write it.
CHATML_TEMPLATE = ("{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor -%}"
                   "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def post(conn, path, request):
    """One request on conn: (ok, seconds, completion tokens, answer or error)."""
    body = json.dumps(request)
    t0 = time.perf_counter()
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        data = json.loads(r.read())
        ok = r.status == 200 and "choices" in data
        if not ok:
            data = {"status": r.status, "answer": data}
    except Exception as e:  # noqa: BLE001 - any failure counts
        ok, data = False, {"error": repr(e)}
        conn.close()
    tokens = data["usage"]["completion_tokens"] if ok else 0
    return ok, time.perf_counter() - t0, tokens, data


def completion(conn, i, max_tokens):
    """One seeded completion on conn: (ok, seconds, completion tokens, answer or error)."""
    return post(conn, "/v1/completions", {"prompt": f"Request {i}: once upon a time", "max_tokens": max_tokens,
                                          "seed": i, "temperature": 0.8})


def chat_completion(conn, i, max_tokens):
    """One seeded chat completion of a short multi-turn conversation, as completion() answers."""
    messages = [{"role": "system", "content": "You are a storyteller. Keep it short."},
                {"role": "user", "content": f"Request {i}: tell me a story."},
                {"role": "assistant", "content": "Once upon a time there was a fox who lived by a river."},
                {"role": "user", "content": "What happened next?"}]
    return post(conn, "/v1/chat/completions", {"messages": messages, "max_tokens": max_tokens, "seed": i,
                                               "temperature": 0.8})


def percentile(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))] if v else float("nan")


def server_arguments(description):
    """An argument parser with the options that say which binary serves which model."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--gatedlm", default=os.path.join(HERE, "..", "build", "gatedlm"))
    ap.add_argument("--checkpoint")
    ap.add_argument("--tokenizer", default="byte")
    return ap


def model_and_server_options(a, work):
    """The checkpoint (a random one made in work when none is given) and serve's options."""
    ck = a.checkpoint
    extra = ["--max-batch", str(a.max_batch), "--max-queue", str(a.requests)]
    if not ck:
        ck = os.path.join(work, "ck")
        subprocess.run([a.gatedlm, "init", "--config", os.path.join(HERE, "configs", "qwen3_100m.json"), "--out", ck],
                       check=True, stdout=subprocess.DEVNULL)
        if a.chat and not a.chat_template:  # a random model has no template of its own
            a.chat_template = os.path.join(work, "chatml.jinja")
            with open(a.chat_template, "w") as f:
                f.write(CHATML_TEMPLATE)
    if a.chat_template:
        extra += ["--chat-template", a.chat_template]
    return ck, extra


def main():
    ap = server_arguments(__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=500)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--max-batch", type=int, default=16)
    ap.add_argument("--chat", action="store_true", help="requests to /v1/chat/completions (a multi-turn conversation)")
    ap.add_argument("--chat-template", help="with --chat: the template serve renders with (serve --chat-template)")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="gatedlm_load_")
    ck, extra = model_and_server_options(a, work)
    request = chat_completion if a.chat else completion
    proc, port, _ = start_server(a.gatedlm, ck, a.tokenizer, work, *extra)
    rss_before = rss_kib(proc.pid)
    latencies, tokens, failures = [], [], []
    lock = threading.Lock()
    next_i = [0]

    def worker():
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        while True:
            with lock:
                i = next_i[0]
                next_i[0] += 1
            if i >= a.requests:
                break
            ok, dt, n, data = request(c, i, a.max_tokens)
            with lock:
                if ok:
                    latencies.append(dt)
                    tokens.append(n)
                else:
                    failures.append(data)
        c.close()

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(a.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    rss_after = rss_kib(proc.pid)
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=120)
    lat = sorted(latencies)
    p = (lambda q: percentile(lat, q))
    endpoint = "/v1/chat/completions, a 4-message conversation" if a.chat else "/v1/completions"
    print(f"# Load test: {a.requests} requests ({endpoint}), {a.concurrency} at a time, max_tokens {a.max_tokens}, "
          f"--max-batch {a.max_batch}, checkpoint {ck}\n")
    print("| requests/s | completion tokens/s | p50 latency s | p99 latency s | failed | RSS before MiB | RSS after MiB |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    print(f"| {len(lat) / wall:.2f} | {sum(tokens) / wall:.1f} | {statistics.median(lat) if lat else float('nan'):.3f} "
          f"| {p(0.99):.3f} | {len(failures)} | {rss_before / 1024:.0f} | {rss_after / 1024:.0f} |")
    print(f"\nserver exit code after SIGTERM: {code}")
    if failures:
        print("first failure:", json.dumps(failures[0])[:500])
    return 1 if failures or code != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
