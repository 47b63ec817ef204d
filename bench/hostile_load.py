#!/usr/bin/python3
"""`gatedlm serve` under hostile load, loopback only, bounded (about 2 minutes), stops by itself.

A steady client (127.0.0.1) runs seeded completions one after another: first alone (the
quiet phase), then while hostile clients (other loopback addresses, 127.0.0.2-6, so that
the per-client cap tells them apart) send, in loops: slow bodies that trickle a byte a
second, gzip bombs (64 KiB inflating to 64 MiB), oversized requests (Content-Length 10^12
with no body, an endless chunked body, a 2 MiB body), malformed ones (bad JSON, a key twice,
a garbage request line, 64 KiB of headers) and streams abandoned after their first event.

Reports the steady client's p50/p99 latency in both phases, its failures (every request is
well-formed: any answer but 200 counts), what the hostile requests were answered, and the
server's RSS before, at its peak (sampled every 0.1 s) and after.

Usage: /usr/bin/python3 bench/hostile_load.py [--gatedlm build/gatedlm] [--checkpoint CK]
          [--quiet-seconds 30] [--hostile-seconds 75]
With no --checkpoint, a random 4-layer byte-level model is made."""
import collections
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from load_test import completion, percentile, rss_kib, server_arguments, start_server  # noqa: E402

CONFIG = dict(vocab_size=258, d_model=256, n_layers=4, n_heads=4, n_kv_heads=2, head_dim=64, ffn_hidden=768,
              max_seq_len=256)


class Steady:
    """The well-formed client: completions back to back, latencies per phase."""

    def __init__(self, port, max_tokens):
        self.port, self.max_tokens = port, max_tokens
        self.phase = "quiet"
        self.latencies, self.failures = collections.defaultdict(list), collections.defaultdict(list)
        self.stop = threading.Event()

    def run(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120, source_address=("127.0.0.1", 0))
        i = 0
        while not self.stop.is_set():
            ok, dt, _, data = completion(conn, i, self.max_tokens)
            (self.latencies if ok else self.failures)[self.phase].append(dt if ok else data)
            i += 1
        conn.close()


def exchange(port, source, head, parts=(), timeout=30, trickle=None, stop=None):
    """One raw request: sends head and parts (then a byte a second while trickle and not
    stop); returns the answer's status code as text ("none" without one, "reset" when the
    server cut the connection first)."""
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=(source, 0))
    except OSError as e:
        return f"connect {e.__class__.__name__}"
    try:
        sock.sendall(head)
        for p in parts:
            sock.sendall(p)
        while trickle and not stop.is_set():
            sock.settimeout(1.0)
            try:
                if sock.recv(1, socket.MSG_PEEK):
                    break  # answered
            except socket.timeout:
                sock.sendall(b"a")
        sock.settimeout(timeout)
        data = sock.recv(64)
        return data.split(b" ")[1].decode() if data.startswith(b"HTTP/1.1 ") else "none"
    except OSError:
        return "reset"
    finally:
        sock.close()


def post_head(path, headers):
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1"] + [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def hostile_kinds(port, stop):
    """name -> (source address, one attempt returning its outcome)."""
    gz = zlib.compressobj(9, zlib.DEFLATED, 31)
    bomb = gz.compress(b'{"prompt": "' + b"a" * (64 << 20) + b'"}') + gz.flush()
    chunk = b"%x\r\n" % 65536 + b"c" * 65536 + b"\r\n"
    big = json.dumps({"prompt": "x" * (2 << 20)}).encode()
    malformed = [b'{"prompt": ', b'{"prompt": "a", "prompt": "b"}', b'{"prompt": "a", "frequency_penalty": 1}',
                 b"[" * 100000]

    def slow_body():
        return exchange(port, "127.0.0.2", post_head("/v1/completions", {"Content-Length": 4000}), [b'{"prompt": "'],
                        trickle=True, stop=stop)

    def gzip_bomb():
        return exchange(port, "127.0.0.3", post_head("/v1/completions", {"Content-Encoding": "gzip",
                                                                         "Content-Length": len(bomb)}), [bomb])

    def oversized(k=[0]):
        k[0] += 1
        if k[0] % 3 == 0:
            return exchange(port, "127.0.0.4", post_head("/v1/completions", {"Content-Length": 10 ** 12}))
        if k[0] % 3 == 1:
            return exchange(port, "127.0.0.4", post_head("/v1/completions", {"Transfer-Encoding": "chunked"}),
                            [chunk] * 40)
        return exchange(port, "127.0.0.4", post_head("/tokenize", {"Content-Length": len(big)}), [big])

    def malformed_request(k=[0]):
        k[0] += 1
        if k[0] % 6 == 4:
            return exchange(port, "127.0.0.5", b"\x16\x03\x01 garbage \x00\r\n\r\n")
        if k[0] % 6 == 5:
            return exchange(port, "127.0.0.5", b"GET /health HTTP/1.1\r\n" + b"X-Pad: " + b"p" * 65536 + b"\r\n\r\n")
        body = malformed[k[0] % len(malformed)]
        return exchange(port, "127.0.0.5", post_head("/v1/completions", {"Content-Length": len(body),
                                                                         "Connection": "close"}), [body])

    def abandoned_stream(k=[0]):
        k[0] += 1
        body = json.dumps({"prompt": "abandon", "max_tokens": 200, "stream": True, "ignore_eos": True, "seed": k[0]})
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30, source_address=("127.0.0.6", 0))
        try:
            c.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
            r = c.getresponse()
            r.fp.readline()
            c.sock.shutdown(socket.SHUT_RDWR)
            return str(r.status)
        except OSError as e:
            return f"error {e.__class__.__name__}"
        finally:
            c.close()

    return {"slow body (x24)": (slow_body, 24), "gzip bomb": (gzip_bomb, 1), "oversized": (oversized, 2),
            "malformed": (malformed_request, 2), "abandoned stream": (abandoned_stream, 1)}


def run_hostile(port, seconds):
    """Runs every hostile kind in loops for `seconds`; returns {kind: Counter of outcomes}."""
    stop, outcomes, lock = threading.Event(), collections.defaultdict(collections.Counter), threading.Lock()

    def loop(name, attempt):
        while not stop.is_set():
            outcome = attempt()
            with lock:
                outcomes[name][outcome] += 1

    threads = [threading.Thread(target=loop, args=(name, attempt))
               for name, (attempt, copies) in hostile_kinds(port, stop).items() for _ in range(copies)]
    for t in threads:
        t.start()
    stop.wait(seconds)
    stop.set()
    for t in threads:
        t.join(timeout=60)
    return outcomes


def main():
    ap = server_arguments(__doc__.split("\n\n")[0])
    ap.add_argument("--quiet-seconds", type=float, default=30)
    ap.add_argument("--hostile-seconds", type=float, default=75)
    ap.add_argument("--max-tokens", type=int, default=16)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="gatedlm_hostile_")
    try:
        ck = a.checkpoint
        if not ck:
            ck = os.path.join(work, "ck")
            with open(os.path.join(work, "config.json"), "w") as f:
                json.dump(CONFIG, f)
            subprocess.run([a.gatedlm, "init", "--config", f.name, "--out", ck, "--seed", "1"], check=True,
                           stdout=subprocess.DEVNULL)
        proc, port, log_path = start_server(a.gatedlm, ck, a.tokenizer, work)
        return measure(a, proc, port, log_path)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def measure(a, proc, port, log_path):
    steady = Steady(port, a.max_tokens)
    samples, sampling = [], threading.Event()

    def sample():
        while not sampling.is_set():
            samples.append(rss_kib(proc.pid))
            sampling.wait(0.1)

    steady_thread, sampler = threading.Thread(target=steady.run), threading.Thread(target=sample)
    rss_before = rss_kib(proc.pid)
    steady_thread.start()
    sampler.start()
    time.sleep(a.quiet_seconds)
    steady.phase = "hostile"
    outcomes = run_hostile(port, a.hostile_seconds)
    steady.phase = "after"
    time.sleep(5)
    steady.stop.set()
    steady_thread.join(timeout=120)
    rss_after = rss_kib(proc.pid)
    sampling.set()
    sampler.join()
    health = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    health.request("GET", "/health")
    health_ok = health.getresponse().status == 200
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=120)
    report(a, steady, outcomes, (rss_before, max(samples + [rss_before]), rss_after), health_ok, code)
    failures = [f for phase in steady.failures.values() for f in phase]
    if failures:
        print("first failure:", json.dumps(failures[0])[:500])
        print(open(log_path).read()[-2000:])
    return 1 if failures or code != 0 or not health_ok else 0


def report(a, steady, outcomes, rss, health_ok, code):
    print(f"# Hostile load: {a.quiet_seconds:.0f} s quiet, then {a.hostile_seconds:.0f} s hostile; steady client: "
          f"completions of {a.max_tokens} tokens back to back\n")
    print("| phase | steady requests | p50 s | p99 s | failed |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for phase in ("quiet", "hostile", "after"):
        lat = steady.latencies[phase]
        print(f"| {phase} | {len(lat)} | {percentile(lat, 0.5):.3f} | {percentile(lat, 0.99):.3f} | "
              f"{len(steady.failures[phase])} |")
    print("\n| hostile kind | attempts | answers |")
    print("| --- | ---: | --- |")
    for name, counter in outcomes.items():
        print(f"| {name} | {sum(counter.values())} | "
              f"{', '.join(f'{k}: {v}' for k, v in sorted(counter.items()))} |")
    print(f"\nserver RSS: before {rss[0] / 1024:.0f} MiB, peak {rss[1] / 1024:.0f} MiB, after {rss[2] / 1024:.0f} MiB; "
          f"/health after the load: {'200' if health_ok else 'FAILED'}; exit code after SIGTERM: {code}")


if __name__ == "__main__":
    sys.exit(main())
