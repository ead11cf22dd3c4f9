#!/usr/bin/env python3
"""Benchmark: the whole `kvaudit diff-turns` process against the same work in Python with
transformers (benches/diff_turns_reference.py). Reports medians over repeated runs.

    python3 benches/diff_turns.py [MODEL_DIR] [--runs N] [--conversations N]

Build first: pgo/build-dist.sh (the distributed build) or cargo build --release. Default model: ../shared/models/qwen3-8b. The last line
times N conversations in one run (one compiled renderer shared by all of them) against one,
and prints the cost each further conversation adds.
"""
import argparse
import os
import statistics
import subprocess
import json
import sys
import tempfile
import time

import kvaudit_exe

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def timed(cmd, runs, env=None):
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        times.append(time.perf_counter() - t)
        if r.returncode not in (0, 1):
            sys.exit(f"{cmd} failed: {r.stderr.decode()}")
    return statistics.median(times), min(times), max(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?", default=os.path.join(ROOT, "..", "shared", "models", "qwen3-8b"))
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--python-runs", type=int, default=5)
    ap.add_argument("--conversations", type=int, default=100)
    args = ap.parse_args()
    exe = kvaudit_exe.path()
    cmd = [exe, "diff-turns", "--model", args.model, "--now", "2026-01-15T10:00:00", "--format", "json"]
    # Warm the prepared-tokenizer cache once (a first run on a new tokenizer prepares it).
    subprocess.run(cmd, stdout=subprocess.DEVNULL)
    rust = timed(cmd, args.runs)
    cold_env = dict(os.environ, KVAUDIT_TOKENIZER_CACHE="off")
    rust_nocache = timed(cmd, args.runs, cold_env)
    py = timed([sys.executable, os.path.join(HERE, "diff_turns_reference.py"), args.model], args.python_runs)
    print(f"model: {args.model}")
    print(f"kvaudit diff-turns (prepared tokenizer): median {rust[0]*1000:.0f} ms (min {rust[1]*1000:.0f}, max {rust[2]*1000:.0f}), {args.runs} runs")
    print(f"kvaudit diff-turns (tokenizer.json):      median {rust_nocache[0]*1000:.0f} ms (min {rust_nocache[1]*1000:.0f}, max {rust_nocache[2]*1000:.0f}), {args.runs} runs")
    print(f"python transformers, same work:         median {py[0]*1000:.0f} ms (min {py[1]*1000:.0f}, max {py[2]*1000:.0f}), {args.python_runs} runs")
    print(f"ratio: {py[0]/rust[0]:.1f}x (prepared), {py[0]/rust_nocache[0]:.1f}x (tokenizer.json)")

    # N conversations in one process: the template is compiled once and shared.
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for i in range(args.conversations):
            path = os.path.join(tmp, f"c{i}.json")
            msgs = [
                {"role": "user", "content": f"Question {i}: what is the difference between a process and a thread?"},
                {"role": "assistant", "content": f"Answer {i}: a process has its own memory; threads share it."},
                {"role": "user", "content": "Thanks, makes sense."},
            ]
            with open(path, "w") as f:
                json.dump({"messages": msgs}, f)
            files.append(path)
        base = [exe, "diff-turns", "--model", args.model, "--now", "2026-01-15T10:00:00", "--format", "json"]
        one = timed(base + ["--conversation", files[0]], args.runs)
        many_cmd = list(base)
        for f in files:
            many_cmd += ["--conversation", f]
        many = timed(many_cmd, args.runs)
        each = (many[0] - one[0]) / max(1, args.conversations - 1)
        print(f"{args.conversations} conversations in one run: median {many[0]*1000:.0f} ms vs {one[0]*1000:.0f} ms for one: {each*1000:.2f} ms per further conversation")


if __name__ == "__main__":
    main()
