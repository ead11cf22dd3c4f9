#!/usr/bin/env python3
"""Benchmark: `kvaudit replay` throughput (events/s) and peak memory, single thread.

Inputs: ../shared/fixtures/vllm-events/s1.frames (4 events: the fixed cost of a run),
s5.frames (2000 messages, 6478 events), and generated vLLM 0.33-style streams of 1M and 2M
events (decode-time 16-token BlockStored events from 16 concurrent requests, 256-token
prefills, a 4096-block pool whose evictions emit single-hash BlockRemoved events first, as
vLLM does). Token ids are drawn uniformly (fixed seed) from a 151,936-id vocabulary (Qwen's),
so the decoder meets the mix of integer widths real prompts and replies have; consecutive
ids would make every width branch predictable and flatter it. Peak memory comes from the
child's max RSS, so the two generated sizes show whether memory grows with the file.

    cargo build --release && python3 benches/replay.py [--runs N]
"""
import argparse
import os
import random
import resource
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections import deque

import kvaudit_exe

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXE = kvaudit_exe.path()


def s(text):
    b = text.encode()
    return bytes([0xA0 | len(b)]) + b


def u(v):
    if v < 0x80:
        return bytes([v])
    if v < 0x100:
        return b"\xcc" + bytes([v])
    if v < 0x10000:
        return b"\xcd" + struct.pack(">H", v)
    if v < 0x100000000:
        return b"\xce" + struct.pack(">I", v)
    return b"\xcf" + struct.pack(">Q", v)


def arr(n):
    return bytes([0x90 | n]) if n < 16 else b"\xdc" + struct.pack(">H", n)


K_TYPE, K_STORED, K_REMOVED = s("type"), s("BlockStored"), s("BlockRemoved")
K = {k: s(k) for k in ["block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "lora_name", "extra_keys", "group_idx", "kv_cache_spec_kind"]}
GPU, FULL = s("GPU"), s("full_attention")


def stored(hashes, parent, tokens):
    out = [b"\xde\x00\x0b", K_TYPE, K_STORED, K["block_hashes"], arr(len(hashes))]
    out += [b"\xcf" + struct.pack(">Q", h) for h in hashes]
    out += [K["parent_block_hash"], b"\xc0" if parent is None else b"\xcf" + struct.pack(">Q", parent)]
    out += [K["token_ids"], arr(len(tokens))] + [u(t) for t in tokens]
    out += [K["block_size"], u(16), K["lora_id"], b"\xc0", K["medium"], GPU, K["lora_name"], b"\xc0"]
    out += [K["extra_keys"], arr(len(hashes)), b"\xc0" * len(hashes), K["group_idx"], b"\x00", K["kv_cache_spec_kind"], FULL]
    return b"".join(out)


def removed(h):
    return b"".join([b"\x84", K_TYPE, K_REMOVED, K["block_hashes"], b"\x91\xcf", struct.pack(">Q", h), K["medium"], GPU, K["group_idx"], b"\x00"])


def generate(path, n_events, seed=20261129):
    rng = random.Random(seed)
    vocab = 151936
    topic = b"kv@decode-0@bench-model"
    pool, events, seq = deque(), 0, 0
    next_hash = 1 << 63
    reqs = [None] * 16
    with open(path, "wb") as f:
        while events < n_events:
            for r in range(16):
                evs = []
                if reqs[r] is None or reqs[r][1] >= 64:
                    hashes = [next_hash + i for i in range(16)]
                    next_hash += 16
                    tokens = [rng.randrange(vocab) for _ in range(256)]
                    evs.append(stored(hashes, None, tokens))
                    reqs[r] = [hashes[-1], 0]
                    pool.extend(hashes)
                else:
                    h = next_hash
                    next_hash += 1
                    evs.append(stored([h], reqs[r][0], [rng.randrange(vocab) for _ in range(16)]))
                    reqs[r] = [h, reqs[r][1] + 1]
                    pool.append(h)
                evictions = []
                while len(pool) > 4096:
                    evictions.append(removed(pool.popleft()))
                evs = evictions + evs
                payload = b"\x93\xcb" + struct.pack(">d", 1.0 + seq) + arr(len(evs)) + b"".join(evs) + b"\x00"
                f.write(struct.pack(">I", len(topic)) + topic + struct.pack(">QI", seq, len(payload)) + payload)
                seq += 1
                events += len(evs)
    return events, seq


def timed(cmd, runs, ok=(0, 1)):
    """Median wall time and median CPU time (user + system) of the child. On a busy machine
    the wall time includes waiting for a core; the CPU time does not, so it is the figure to
    compare across runs when other work shares the cores."""
    times, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        times.append(time.perf_counter() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
        if r.returncode not in ok:
            sys.exit(r.stderr.decode())
    return statistics.median(times), statistics.median(cpus)


def peak_rss_mb(cmd):
    # A fresh child per measurement: RUSAGE_CHILDREN's max covers every child so far.
    code = (
        "import resource,subprocess,sys;"
        f"subprocess.run({cmd!r},stdout=subprocess.DEVNULL);"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    return int(subprocess.check_output([sys.executable, "-c", code]).strip()) / 1024


def replay_cmd(path, blocks):
    return [EXE, "replay", path, "--index-block-size", blocks, "--format", "json"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    fixtures = os.path.join(ROOT, "..", "shared", "fixtures", "vllm-events")
    rows = []
    # s1 (4 events) is the floor: process start, file open and report, with next to no events.
    for name, events in (("s1.frames", 4), ("s5.frames", 6478)):
        if os.path.exists(os.path.join(fixtures, name)):
            rows.append((name, os.path.join(fixtures, name), events))
    with tempfile.TemporaryDirectory() as tmp:
        for n in (1_000_000, 2_000_000):
            path = os.path.join(tmp, f"gen-{n}.frames")
            t = time.perf_counter()
            events, messages = generate(path, n)
            print(f"generated {events} events in {messages} messages ({os.path.getsize(path) / 1e6:.0f} MB) in {time.perf_counter() - t:.1f} s", file=sys.stderr)
            rows.append((f"generated {events // 1000}k events", path, events))
        for blocks in ("64", "16,64"):
            for name, path, events in rows:
                med, cpu = timed(replay_cmd(path, blocks), args.runs)
                rss = peak_rss_mb(replay_cmd(path, blocks))
                print(f"{name:26} index blocks {blocks:6}: median {med * 1000:8.1f} ms, {events / med / 1e6:6.2f} M events/s, {os.path.getsize(path) / med / 1e6:7.0f} MB/s, peak RSS {rss:6.1f} MB; CPU {cpu * 1000:8.1f} ms, {events / max(cpu, 1e-9) / 1e6:6.2f} M events/s of CPU time")

if __name__ == "__main__":
    main()
