#!/usr/bin/env python3
"""Benchmark: `kvaudit corpus` as built at several commits, on one corpus, runs alternating.

    python3 benches/corpus_builds.py REV [REV ...] [--exe LABEL=PATH ...] [--runs N] [--jobs N]
        [--models a,b] [--conversations N,...] [--corpus FILE ...]

On a shared machine whose speed drifts, comparing two builds timed minutes apart says little;
here each round runs every build once, in turn, and the median over rounds is reported per
build. Each REV is checked out into a temporary worktree and built with --release into one
shared target directory (under target/, so dependencies build once). Outputs are compared:
a build whose `corpus --format json` differs from the first build's (apart from the input
path) is reported as such. The corpus is benches/corpus.py's (seed 1), of 10,000
conversations or of each size given with --conversations (e.g. 1,1000,10000: start-up, a
small run, the bench corpus; 0 for none), and each file given with --corpus.

With --instructions, each build instead runs once under valgrind's callgrind and the
instructions it executed are reported: a count that does not depend on what else the machine
is doing (the same binary, input and environment give the same count), for steps too small to
see through the VM's noise. It is slow (about 60x), so use it with --conversations 2000.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import corpus as corpus_bench  # noqa: E402

SHARED = os.path.join(ROOT, "..", "shared")


def build(rev, work, target):
    tree = os.path.join(work, rev)
    subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", "-f", tree, rev],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.run(["cargo", "build", "--release", "--quiet", "--target-dir", target],
                   cwd=tree, check=True)
    exe = os.path.join(work, f"kvaudit-{rev}")
    os.replace(os.path.join(target, "release", "kvaudit"), exe)
    return tree, exe


def instructions(cmd, env):
    """Instructions `cmd` executes, all threads, as callgrind counts them."""
    p = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"] + cmd,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True)
    for line in p.stderr.splitlines():
        if "Collected :" in line:
            return int(line.rsplit(":", 1)[1].strip())
    sys.exit(f"no instruction count from callgrind: {p.stderr[-2000:]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("revs", nargs="*")
    ap.add_argument("--exe", action="append", default=[], metavar="LABEL=PATH",
                    help="a binary already built (repeatable), timed beside the REVs' builds, "
                         "e.g. plain=target/plain/release/kvaudit")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--conversations", default="10000",
                    help="corpus sizes, comma-separated (each a corpus of its own)")
    ap.add_argument("--models", default="qwen3-8b,llama-3.1-8b-instruct")
    ap.add_argument("--corpus", action="append", default=[],
                    help="a corpus file to run as well (repeatable), e.g. pgo/train.py --heldout")
    ap.add_argument("--instructions", action="store_true",
                    help="count instructions under callgrind instead of timing")
    args = ap.parse_args()
    target = os.path.join(ROOT, "target", "bench-builds")
    with tempfile.TemporaryDirectory() as work:
        trees = []
        try:
            exes = {}
            for rev in args.revs:
                tree, exe = build(rev, work, target)
                trees.append(tree)
                exes[rev] = exe
            for spec in args.exe:
                label, _, path = spec.partition("=")
                if not path or not os.path.isfile(path):
                    sys.exit(f"error: --exe {spec}: expected LABEL=PATH to a binary")
                exes[label] = os.path.abspath(path)
            if not exes:
                sys.exit("error: nothing to time: give a REV or --exe")
            # A cache of prepared tokenizers per build: builds on either side of a format
            # change would otherwise rebuild each other's files inside the timed runs.
            envs = {rev: dict(os.environ, KVAUDIT_TOKENIZER_CACHE=os.path.join(work, f"cache-{rev}"))
                    for rev in exes}
            sizes = []
            for n in (int(n) for n in args.conversations.split(",") if int(n)):
                corpus = os.path.join(work, f"corpus-{n}.jsonl")
                corpus_bench.build_corpus(corpus, n, 1)
                sizes.append((f"{n} conversations", corpus))
            sizes += [(os.path.basename(c), os.path.abspath(c)) for c in args.corpus]
            for (n, corpus), name in ((s, m) for s in sizes for m in args.models.split(",")):
                model = os.path.join(SHARED, "models", name)
                base = ["corpus", "--model", model, corpus, "--now", "2026-01-15T10:00:00",
                        "--format", "json", "--jobs", str(args.jobs)]
                outputs = {}
                for rev, exe in exes.items():
                    # Warm-up: the prepared tokenizer is written on a first run.
                    out = subprocess.run([exe] + base, capture_output=True, env=envs[rev]).stdout
                    report = json.loads(out)
                    report.pop("input", None)
                    outputs[rev] = report
                first = next(iter(exes))
                if args.instructions:
                    print(f"model {name}, {n}, --jobs {args.jobs}, instructions (callgrind):")
                    counts = {rev: instructions([exe] + base, envs[rev]) for rev, exe in exes.items()}
                    for rev in exes:
                        same = "same output" if outputs[rev] == outputs[first] else "OUTPUT DIFFERS"
                        print(f"  {rev:>12}: {counts[rev]:,} "
                              f"({counts[rev] / counts[first]:.3f} of {first}), {same}")
                    continue
                walls = {rev: [] for rev in exes}
                for _ in range(args.runs):
                    for rev, exe in exes.items():
                        start = time.perf_counter()
                        subprocess.run([exe] + base, stdout=subprocess.DEVNULL, env=envs[rev])
                        walls[rev].append(time.perf_counter() - start)
                print(f"model {name}, {n}, --jobs {args.jobs}, "
                      f"medians of {args.runs} alternating runs:")
                for rev in exes:
                    same = "same output" if outputs[rev] == outputs[first] else "OUTPUT DIFFERS"
                    median = statistics.median(walls[rev])
                    ratio = statistics.median(walls[first]) / median
                    print(f"  {rev:>12}: {1000 * median:.1f} ms ({ratio:.3f}x {first}), {same}")
        finally:
            for tree in trees:
                subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", tree],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
