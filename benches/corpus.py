#!/usr/bin/env python3
"""Benchmark: `kvaudit corpus` over >= 10,000 real multi-turn conversations against the same
computation with transformers in one Python process (benches/corpus_reference.py).

    python3 benches/corpus.py [--conversations N] [--runs N] [--python-runs N] [--models a,b]

The corpus is built from ../shared/corpus with a fixed seed: every plain-text conversation
(user/assistant/system messages with string content, at least one request after a reply)
of every file, cycled and shuffled until N are taken; a repeated conversation gets a marker
appended to its first user message, so no two rows are the same text. Reports, per model:
conversations/s of kvaudit with --jobs 1 and --jobs 2 (median wall time, CPU time, peak
RSS) and of transformers, and the ratio. Build first: pgo/build-dist.sh (the distributed build) or cargo build --release.
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

import kvaudit_exe

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SHARED = os.path.join(ROOT, "..", "shared")


def build_corpus(path, n, seed, keep=None, short=False):
    """`keep(line)`, when given, picks the conversations (raw lines) the pool takes. `short`:
    each conversation cut to its first request after a reply (user, reply, user, as a chat's
    second turn is sent), and only those of at most 2,000 characters then: the shape of one
    request `watch` renders, where per-conversation costs weigh most."""
    pool = []
    corpus_dir = os.path.join(SHARED, "corpus")
    for name in sorted(os.listdir(corpus_dir)):
        if not name.endswith(".jsonl"):
            continue
        with open(os.path.join(corpus_dir, name), encoding="utf-8") as f:
            for line in f:
                if keep is not None and not keep(line):
                    continue
                msgs = json.loads(line)["messages"]
                if not all(m["role"] in ("user", "assistant", "system") and isinstance(m.get("content"), str)
                           for m in msgs):
                    continue
                plain = [{"role": m["role"], "content": m["content"]} for m in msgs]
                replies = [i for i, m in enumerate(plain) if m["role"] == "assistant"]
                if replies and any(m["role"] == "user" for m in plain[replies[0]:]):
                    if short:
                        nxt = next(i for i in range(replies[0], len(plain)) if plain[i]["role"] == "user")
                        plain = plain[:nxt + 1]
                        if sum(len(m["content"]) for m in plain) > 2000:
                            continue
                    pool.append(plain)
    rng = random.Random(seed)
    rows = []
    round_ = 0
    while len(rows) < n:
        order = list(range(len(pool)))
        rng.shuffle(order)
        for i in order:
            msgs = [dict(m) for m in pool[i]]
            if round_:
                first = next(m for m in msgs if m["role"] == "user")
                first["content"] += f" (variant {round_})"
            rows.append(msgs)
            if len(rows) == n:
                break
        round_ += 1
    with open(path, "w", encoding="utf-8") as f:
        for msgs in rows:
            f.write(json.dumps({"messages": msgs}, ensure_ascii=False) + "\n")
    return len(pool)


def timed(cmd, runs, env=None):
    walls, cpus, rss = [], [], []
    out = b""
    for _ in range(runs):
        before = os.times()
        t = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        _, status, usage = os.wait4(p.pid, 0)
        walls.append(time.perf_counter() - t)
        out = p.stdout.read()
        err = p.stderr.read()
        code = os.waitstatus_to_exitcode(status)
        if code not in (0, 1):
            sys.exit(f"{' '.join(cmd)} failed ({code}): {err.decode()[-2000:]}")
        cpus.append(usage.ru_utime + usage.ru_stime)
        rss.append(usage.ru_maxrss / 1024)
    return statistics.median(walls), statistics.median(cpus), max(rss), out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--conversations", type=int, default=10000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--python-runs", type=int, default=1)
    ap.add_argument("--models", default="qwen3-8b,llama-3.1-8b-instruct")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--short", action="store_true", help="short conversations: see build_corpus")
    args = ap.parse_args()
    exe = kvaudit_exe.path()
    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "corpus.jsonl")
        pool = build_corpus(corpus, args.conversations, args.seed, short=args.short)
        size = os.path.getsize(corpus) / 1e6
        print(f"corpus: {args.conversations} conversations ({pool} distinct plain-text ones from ../shared/corpus), {size:.1f} MB, seed {args.seed}")
        for name in args.models.split(","):
            model = os.path.join(SHARED, "models", name)
            base = [exe, "corpus", "--model", model, corpus, "--now", "2026-01-15T10:00:00", "--format", "json"]
            subprocess.run(base + ["--limit", "10"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            results = {}
            for jobs in (1, 2):
                wall, cpu, rss, out = timed(base + ["--jobs", str(jobs)], args.runs)
                report = json.loads(out)
                results[jobs] = (wall, cpu, rss, report)
            n = results[1][3]["conversations"]
            py_wall, py_cpu, py_rss, py_out = timed(
                [sys.executable, os.path.join(HERE, "corpus_reference.py"), model, corpus], args.python_runs)
            py = json.loads(py_out)
            print(f"\nmodel {name}: kvaudit audited {n} conversations, {results[1][3]['transitions']} transitions; "
                  f"transformers {py['conversations']} conversations, {py['transitions']} transitions")
            for jobs, (wall, cpu, rss, _) in results.items():
                print(f"  kvaudit --jobs {jobs}: median {wall:.2f} s wall ({n / wall:,.0f} conversations/s), "
                      f"{cpu:.2f} s CPU, peak RSS {rss:.0f} MB, {args.runs} runs")
            print(f"  transformers (one process): {py_wall:.2f} s wall ({py['conversations'] / py_wall:,.0f} conversations/s), "
                  f"{py_cpu:.2f} s CPU, peak RSS {py_rss:.0f} MB, {args.python_runs} run(s)")
            print(f"  ratio: {py_wall / results[2][0]:.1f}x with --jobs 2, {py_wall / results[1][0]:.1f}x with --jobs 1; "
                  f"--jobs 2 is {results[1][0] / results[2][0]:.2f}x --jobs 1")


if __name__ == "__main__":
    main()
