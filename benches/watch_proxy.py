#!/usr/bin/env python3
"""What `kvaudit watch`'s proxy adds to a request: latency percentiles and requests per second
of N concurrent keep-alive clients against a fast local upstream, directly and through the
proxy, in the same run (alternating rounds).

  python3 benches/watch_proxy.py --clients 1 --clients 64 --seconds 5 --rounds 3

The upstream (asyncio, in this process's child) answers every request at once with a short
streamed chat completion whose last chunk carries usage, as vLLM does with include_usage; the
clients send a short chat request (two messages) and read the whole answer. watch runs with two
pods bound and no events (so each request is rendered, tokenized and linked, and counted
unattributed for want of a pod), its metrics and per-request file off. The model is the repo's
tiny fixture unless --model is given (a real tokenizer makes the monitor's work heavier, not
the proxy's). The executable is KVAUDIT_BENCH_EXE, else target/dist/kvaudit, else
target/release/kvaudit.

Prints one JSON object: per clients count and path (direct, proxy), the median over rounds of
p50/p99 latency (ms) and requests/s, the added p50/p99, and what watch counted (requests seen,
observations dropped because its monitor fell behind).
"""
import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time

import kvaudit_exe

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def response_bytes():
    chunks = [
        'data: {"choices":[{"delta":{"content":"Hi"}}]}\n\n',
        'data: {"choices":[],"usage":{"prompt_tokens":20,"completion_tokens":1,'
        '"prompt_tokens_details":{"cached_tokens":0}}}\n\ndata: [DONE]\n\n',
    ]
    body = "".join(f"{len(c.encode()):x}\r\n{c}\r\n" for c in chunks) + "0\r\n\r\n"
    head = ("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            "transfer-encoding: chunked\r\n\r\n")
    return (head + body).encode()


def request_bytes(i):
    body = json.dumps({"model": "tiny", "stream": True,
                       "stream_options": {"include_usage": True},
                       "messages": [{"role": "system", "content": "Be brief."},
                                    {"role": "user", "content": f"Question {i}: what is 2 + 2?"}]})
    return (f"POST /v1/chat/completions HTTP/1.1\r\nHost: bench\r\n"
            f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n{body}").encode()


def upstream(port):
    """Answers each request (head + content-length body) with the canned stream."""
    answer = response_bytes()

    class Conn(asyncio.Protocol):
        def connection_made(self, t):
            self.t, self.buf = t, b""

        def data_received(self, data):
            self.buf += data
            while True:
                end = self.buf.find(b"\r\n\r\n")
                if end < 0:
                    return
                head = self.buf[:end].lower()
                at = head.find(b"content-length:")
                n = int(head[at + 15:].split(b"\r\n")[0]) if at >= 0 else 0
                if len(self.buf) < end + 4 + n:
                    return
                self.buf = self.buf[end + 4 + n:]
                self.t.write(answer)

    async def main():
        server = await asyncio.get_running_loop().create_server(Conn, "127.0.0.1", port, backlog=1024)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


async def client(port, seconds, offset, latencies):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    end_marker = b"0\r\n\r\n"
    deadline = time.perf_counter() + seconds
    i = offset
    while time.perf_counter() < deadline:
        req = request_bytes(i)
        i += 1
        t0 = time.perf_counter()
        writer.write(req)
        got = b""
        while not got.endswith(end_marker):
            chunk = await reader.read(65536)
            if not chunk:
                raise RuntimeError("connection closed")
            got += chunk
        latencies.append(time.perf_counter() - t0)
    writer.close()


async def load(port, clients, seconds):
    latencies = []
    start = time.perf_counter()
    await asyncio.gather(*(client(port, seconds, k * 1_000_000, latencies) for k in range(clients)))
    took = time.perf_counter() - start
    latencies.sort()
    pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000
    return {"p50_ms": pick(0.50), "p99_ms": pick(0.99), "rps": len(latencies) / took,
            "requests": len(latencies)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, action="append")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--model", default=os.path.join(ROOT, "fixtures/models/tiny-think"))
    args = ap.parse_args()
    clients = args.clients or [1, 64]
    exe = kvaudit_exe.path()
    up_port, proxy_port = free_port(), free_port()
    up = subprocess.Popen([sys.executable, "-c",
                           f"import sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r}); "
                           f"import watch_proxy as w; w.upstream({up_port})"])
    watch = subprocess.Popen(
        [exe, "watch", "-m", args.model, "--server", "vllm",
         "--bind", "d0=tcp://127.0.0.1:0", "--bind", "d1=tcp://127.0.0.1:0",
         "--upstream", f"http://127.0.0.1:{up_port}", "--listen", f"127.0.0.1:{proxy_port}",
         "--format", "json", "--interval", "1h", "--drain", "2s"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        for port in (up_port, proxy_port):
            for _ in range(200):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    time.sleep(0.05)
        results = {}
        for n in clients:
            runs = {"direct": [], "proxy": []}
            for _ in range(args.rounds):
                for path, port in (("direct", up_port), ("proxy", proxy_port)):
                    runs[path].append(asyncio.run(load(port, n, args.seconds)))
            med = {path: {k: statistics.median(r[k] for r in rs) for k in ("p50_ms", "p99_ms", "rps")}
                   for path, rs in runs.items()}
            med["added_p50_ms"] = med["proxy"]["p50_ms"] - med["direct"]["p50_ms"]
            med["added_p99_ms"] = med["proxy"]["p99_ms"] - med["direct"]["p99_ms"]
            results[f"{n} clients"] = med
    finally:
        watch.send_signal(signal.SIGTERM)
        out, _ = watch.communicate(timeout=60)
        up.kill()
    report = json.loads(out or b"{}")
    results["watch"] = {
        "requests_attributed": report.get("totals", {}).get("requests"),
        "unattributed": report.get("totals", {}).get("unattributed"),
        "dropped": report.get("input", {}).get("dropped"),
        "links": report.get("input", {}).get("links"),
    }
    results["exe"] = exe
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
