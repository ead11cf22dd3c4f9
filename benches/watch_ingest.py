#!/usr/bin/env python3
"""Benchmark: how fast `kvaudit watch` keeps a pod's view from its KV events, and what a
tracked block costs in memory.

Ingest: the generated vLLM 0.33-style stream of benches/replay.py (1M events: decode-time
16-token BlockStored events of 16 concurrent requests, a 4,096-block pool whose evictions emit
BlockRemoved), given as one pod's capture and then as each of two pods', through watch's
request-log mode with no requests: the cost is the events' decoding and the pods' views.

Memory: streams that store N distinct blocks and remove none (prefills of 16 blocks of 16
random tokens), N = 250k, 500k, 1M, with --capacity N; the peak RSS against the run with no
events gives the bytes per tracked block.

    cargo build --release && python3 benches/watch_ingest.py [--runs N]
"""
import argparse
import os
import random
import struct
import sys
import tempfile

import kvaudit_exe
from replay import arr, generate, peak_rss_mb, stored, timed

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXE = kvaudit_exe.path()
MODEL = os.path.join(ROOT, "fixtures", "models", "tiny-think")


def generate_held(path, n_blocks, seed=20261207):
    """Prefills of 16 blocks each, every block new, nothing removed."""
    rng = random.Random(seed)
    topic = b"kv@decode-0@bench-model"
    next_hash, seq, blocks = 1 << 62, 0, 0
    with open(path, "wb") as f:
        while blocks < n_blocks:
            hashes = [next_hash + i for i in range(16)]
            next_hash += 16
            tokens = [rng.randrange(151936) for _ in range(256)]
            ev = stored(hashes, None, tokens)
            payload = b"\x93\xcb" + struct.pack(">d", 1.0 + seq) + arr(1) + ev + b"\x00"
            f.write(struct.pack(">I", len(topic)) + topic + struct.pack(">QI", seq, len(payload)) + payload)
            seq += 1
            blocks += 16
    return blocks


def watch(captures, capacity, requests):
    cmd = [EXE, "watch", "-m", MODEL, "--server", "vllm", "--block-size", "16", "--format", "json",
           "--capacity", str(capacity), "--requests", requests]
    for i, c in enumerate(captures):
        cmd += ["--pod", f"d{i}={c}"]
    return cmd


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        requests = os.path.join(tmp, "requests.jsonl")
        open(requests, "w").close()
        stream = os.path.join(tmp, "stream.frames")
        events, messages = generate(stream, 1_000_000)
        size = os.path.getsize(stream)
        print(f"stream: {events} events in {messages} messages ({size / 1e6:.0f} MB)", file=sys.stderr)
        for pods in (1, 2):
            cmd = watch([stream] * pods, 8192, requests)
            med, cpu = timed(cmd, args.runs, ok=(0,))
            rss = peak_rss_mb(cmd)
            print(f"ingest, {pods} pod(s): median {med * 1000:8.1f} ms, {events * pods / med / 1e6:5.2f} M events/s in all "
                  f"(one thread), {size * pods / med / 1e6:5.0f} MB/s, peak RSS {rss:6.1f} MB; CPU {cpu * 1000:8.1f} ms")
        empty = os.path.join(tmp, "empty.frames")
        open(empty, "wb").close()
        base = peak_rss_mb(watch([empty], 1, requests))
        print(f"memory: no events, peak RSS {base:6.1f} MB")
        for n in (250_000, 500_000, 1_000_000):
            path = os.path.join(tmp, f"held-{n}.frames")
            blocks = generate_held(path, n)
            cmd = watch([path], blocks, requests)
            rss = peak_rss_mb(cmd)
            med, _ = timed(cmd, 1, ok=(0,))
            print(f"memory: {blocks} blocks held, peak RSS {rss:6.1f} MB, {(rss - base) * 1024 * 1024 / blocks:5.1f} bytes per block "
                  f"over the empty run ({med * 1000:.0f} ms)")
            os.remove(path)


if __name__ == "__main__":
    main()
