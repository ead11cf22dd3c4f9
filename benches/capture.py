#!/usr/bin/env python3
"""Benchmark: sustained `kvaudit capture` throughput from a local libzmq (pyzmq) publisher,
with --live-replay off and on. The publisher sends the payloads of s5.frames (real vLLM 0.33
batches) round-robin, as fast as it can, with an unlimited send queue so nothing is dropped
at the PUB side; throughput = messages / time from the first message to the last written.
Peak RSS is each capture process's own; comparing --messages sizes shows it does not grow with
the capture.

    cargo build --release && python3 benches/capture.py [--messages N] [--runs R]
"""
import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import threading

import zmq

import kvaudit_exe

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXE = kvaudit_exe.path()
S5 = os.path.join(ROOT, "..", "shared", "fixtures", "vllm-events", "s5.frames")


def payloads(path):
    data = open(path, "rb").read()
    at, out = 0, []
    while at < len(data):
        (tl,) = struct.unpack_from(">I", data, at)
        (pl,) = struct.unpack_from(">I", data, at + 12 + tl)
        out.append(data[at + 16 + tl : at + 16 + tl + pl])
        at += 16 + tl + pl
    return out


def one_run(msgs, n, live):
    ctx = zmq.Context()
    pub = ctx.socket(zmq.XPUB)
    pub.sndhwm = 0
    port = pub.bind_to_random_port("tcp://127.0.0.1")
    out = os.path.join(tempfile.mkdtemp(), "bench.frames")
    cmd = [EXE, "capture", "--endpoint", f"tcp://127.0.0.1:{port}", "--out", out, "--max-messages", str(n), "--format", "json"]
    if live:
        cmd += ["--live-replay", "--index-block-size", "16,64"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE)
    pub.recv()  # subscription

    def send():
        topic = b"kv@pod-0@bench-model"
        for i in range(n):
            pub.send_multipart([topic, struct.pack(">Q", i), msgs[i % len(msgs)]], copy=False)

    t = threading.Thread(target=send)
    t.start()
    stdout = proc.stdout.read()
    # This child's own peak RSS (the live emulation must not grow with the capture).
    _, _, usage = os.wait4(proc.pid, 0)
    t.join()
    pub.close(linger=0)
    ctx.term()
    v = json.loads(stdout)
    size = os.path.getsize(out)
    os.remove(out)
    if v["messages"] != n or v["gaps"]:
        sys.exit(f"lost messages: {v['messages']} of {n}, gaps {v['gaps']}")
    return n / v["active_seconds"], size / v["active_seconds"] / 1e6, usage.ru_maxrss / 1024


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    msgs = payloads(S5)
    for live in (False, True):
        rates = [one_run(msgs, args.messages, live) for _ in range(args.runs)]
        mps = statistics.median(r[0] for r in rates)
        mbs = statistics.median(r[1] for r in rates)
        rss = max(r[2] for r in rates)
        print(f"capture {'with' if live else 'without'} --live-replay: median {mps:,.0f} messages/s, {mbs:.1f} MB/s, peak RSS {rss:.1f} MB ({args.messages} messages x {args.runs} runs)")


if __name__ == "__main__":
    main()
