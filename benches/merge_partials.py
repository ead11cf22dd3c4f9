#!/usr/bin/env python3
"""Benchmark: `kvaudit merge` of partials that describe 1 M and 10 M conversations.

A partial grows with the distinct opening messages (session keys) of its shard, the one table
of a corpus run that does, so the partials are made from a real one (the fixture corpus
audited with `corpus --partial`) with its session keys replaced by N distinct ones, an
excerpt of 40 to 60 characters each, split over S shards. Times `kvaudit merge` of them as a
whole process (median of --runs) with its peak RSS, and checks the merged report counts N
distinct keys.

    python3 benches/merge_partials.py [--conversations 1000000,10000000] [--shards 4]
        [--runs 3]
"""
import argparse
import json
import os
import resource
import subprocess
import statistics
import sys
import tempfile
import time

import kvaudit_exe

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def base_partial(exe, out):
    cmd = [exe, "corpus", "-m", os.path.join(ROOT, "fixtures/models/tiny-think"),
           os.path.join(ROOT, "fixtures/corpus/chats.jsonl"), "--partial", out]
    run = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if run.returncode not in (0, 1):
        sys.exit(f"{' '.join(cmd)}: {run.stderr.decode()}")
    return json.load(open(out))


def write_shard(base, path, first, count, shard):
    """`base` with `count` distinct session keys numbered from `first`, as shard `shard`."""
    p = json.loads(json.dumps(base))
    rows = p["tally"]["rows"] - p["tally"]["conversations"] + count
    p["tally"]["conversations"] = count
    p["tally"]["rows"] = rows
    p["input"]["files"] = [dict(p["input"]["files"][0], path=f"shard-{shard}.jsonl", rows=rows,
                                digest=f"{shard:032x}")]
    p["tally"]["sessions"] = "@SESSIONS@"
    head, tail = json.dumps(p, separators=(",", ":")).split('"@SESSIONS@"')
    with open(path, "w") as f:
        f.write(head)
        f.write("[")
        for i in range(first, first + count):
            if i > first:
                f.write(",")
            key = (i * 0x9E3779B97F4A7C15F39CC0605CEDC835) % (1 << 128)
            excerpt = f"Can you help me with question number {i} of my homework today"[:40 + i % 21]
            f.write(f'["{key:032x}",1,2,2,{i - first},{json.dumps(excerpt)}]')
        f.write("]")
        f.write(tail)
        f.write("\n")


def merge(exe, paths):
    start = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    run = subprocess.run([exe, "merge", *paths, "--format", "json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if run.returncode not in (0, 1):
        sys.exit(f"merge: exit {run.returncode}: {run.stderr.decode()}")
    # ru_maxrss of children is the largest so far: a later, larger run raises it.
    return seconds, max(peak, before), json.loads(run.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--conversations", default="1000000,10000000")
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    exe = kvaudit_exe.path()
    print(f"kvaudit: {exe}")
    print("| conversations | shards | partials on disk | merge (median) | peak RSS |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as tmp:
        base = base_partial(exe, os.path.join(tmp, "base.json"))
        for n in [int(x) for x in args.conversations.split(",")]:
            paths, per = [], n // args.shards
            for s in range(args.shards):
                path = os.path.join(tmp, f"p{s}.json")
                write_shard(base, path, s * per, per, s)
                paths.append(path)
            size = sum(os.path.getsize(p) for p in paths)
            times, peak = [], 0
            for _ in range(args.runs):
                seconds, rss, report = merge(exe, paths)
                times.append(seconds)
                peak = max(peak, rss)
                distinct = report["session_key_collisions"]["distinct_keys"]
                if distinct != per * args.shards:
                    sys.exit(f"{distinct} distinct keys, expected {per * args.shards}")
            print(f"| {n:,} | {args.shards} | {size / 1e6:,.0f} MB | "
                  f"{statistics.median(times):.2f} s | {peak / 1024:,.0f} MB |")
            for p in paths:
                os.remove(p)


if __name__ == "__main__":
    main()
