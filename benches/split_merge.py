#!/usr/bin/env python3
"""Benchmark: a corpus audited as shards and merged, against one run over the same shards.

Writes N conversations (every conversation of ../shared/corpus, cycled in order) as S shard
files, then times, as whole processes:
  - one `kvaudit corpus` over all shards with --jobs 1 and --jobs 2;
  - `kvaudit corpus --partial` on each shard in turn (--jobs 1) and `kvaudit merge` of the
    partials (the merge's own cost, and the partials' size);
  - examples/ray_corpus.py with 1 and 2 Ray workers (Ray's local mode), when a Python with
    Ray Data is given (--ray-python; .ci/ray.sh installs one).
Every merged report is checked equal to the one run's (file paths and --jobs aside).

    python3 benches/split_merge.py [--conversations 100000] [--shards 16] [--model DIR]
        [--ray-python PATH]
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

import kvaudit_exe

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
NOW = ["--now", "2026-01-15T10:00:00"]


def timed(cmd):
    start = time.perf_counter()
    run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    seconds = time.perf_counter() - start
    if run.returncode not in (0, 1):
        sys.exit(f"{' '.join(cmd)}: exit {run.returncode}: {run.stderr.decode()}")
    return seconds, run.stdout, run.stderr.decode()


def comparable(report_bytes):
    r = json.loads(report_bytes)
    r["input"]["jobs"] = None
    r["model"]["source"] = os.path.basename(os.path.normpath(r["model"]["source"]))
    for f in r["input"]["files"]:
        f["path"] = os.path.basename(f["path"])
    for w in r["worst_conversations"]:
        w["source"] = os.path.basename(w["source"])
    for s in r["skipped_examples"].values():
        s["rows"] = [os.path.basename(x) for x in s["rows"]]
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--conversations", type=int, default=100_000)
    ap.add_argument("--shards", type=int, default=16)
    ap.add_argument("--model", default=os.path.join(ROOT, "..", "shared", "models", "qwen3-8b"))
    ap.add_argument("--ray-python", help="a Python with Ray Data (e.g. ~/.cache/kvaudit-ray/ray-2.60.0/bin/python)")
    args = ap.parse_args()
    exe = kvaudit_exe.path()
    rows = []
    for path in sorted(glob.glob(os.path.join(ROOT, "..", "shared", "corpus", "*.jsonl"))):
        with open(path, encoding="utf-8") as f:
            rows.extend(line for line in f if line.strip())
    with tempfile.TemporaryDirectory() as tmp:
        shards = []
        per = -(-args.conversations // args.shards)
        for k in range(args.shards):
            part = [rows[i % len(rows)] for i in range(k * per, min((k + 1) * per, args.conversations))]
            path = os.path.join(tmp, f"shard-{k:03d}.jsonl")
            with open(path, "w", encoding="utf-8") as f:
                f.writelines(part)
            shards.append(path)
        size = sum(os.path.getsize(s) for s in shards)
        print(f"{args.conversations} conversations in {args.shards} shards ({size / 1e6:.1f} MB), "
              f"model {os.path.basename(os.path.normpath(args.model))}, {exe}")
        # A first run prepares the tokenizer cache.
        timed([exe, "corpus", "-m", args.model, shards[0], "--format", "json", *NOW])
        one = {}
        for jobs in (1, 2):
            t, out, _ = timed([exe, "corpus", "-m", args.model, *shards, "--jobs", str(jobs),
                               "--format", "json", *NOW])
            one[jobs] = comparable(out)
            n = one[jobs]["conversations"]
            print(f"one run, --jobs {jobs}: {t:.2f} s ({n / t:,.0f} conversations/s)")
        partials, shard_time = [], 0.0
        for s in shards:
            p = s + ".partial.json"
            t, _, _ = timed([exe, "corpus", "-m", args.model, s, "--jobs", "1", "--partial", p,
                             "--format", "json", *NOW])
            shard_time += t
            partials.append(p)
        t, out, _ = timed([exe, "merge", *partials, "--format", "json"])
        assert comparable(out) == one[1], "the merge differs from one run"
        partial_bytes = sum(os.path.getsize(p) for p in partials)
        print(f"shards one after another, --jobs 1: {shard_time:.2f} s; merge of {len(partials)} "
              f"partials ({partial_bytes / 1e6:.1f} MB): {t * 1000:.0f} ms")
        if args.ray_python:
            for workers in (1, 2):
                t, out, err = timed([args.ray_python, os.path.join(ROOT, "examples", "ray_corpus.py"),
                                     "-m", args.model, *shards, "--workers", str(workers),
                                     "--format", "json", "--kvaudit", exe, "--", *NOW])
                assert comparable(out) == one[1], f"Ray with {workers} workers differs from one run"
                summary = [l for l in err.splitlines() if "conversations/s" in l]
                print(f"Ray, {workers} workers: {t:.2f} s in all (Ray's start included); "
                      f"{summary[-1] if summary else err}")


if __name__ == "__main__":
    main()
