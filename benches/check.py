#!/usr/bin/env python3
"""Benchmark: `kvaudit check` over every model of ../shared/models (built-in probe set, models
audited in parallel) as a CI job runs it, warm (prepared tokenizers cached, as the documented
workflow caches them) and cold (an empty tokenizer cache: every prepared tokenizer is built
and written; and with the cache off: tokenizer.json parsed directly), against the same work
with transformers in one Python process (benches/check_reference.py). Medians over runs.

    python3 benches/check.py [--runs N] [--python-runs N] [--models-dir DIR]
    python3 benches/check.py --exe LABEL=PATH --exe LABEL=PATH [--runs N]

With --exe (twice or more), only the warm figure, for comparing builds on a machine whose speed
drifts: each build gets its own prepared cache and three runs to fill it, then every round
runs each build once, in turn; the median and fastest of --runs rounds are reported per build.

Build first: pgo/build-dist.sh (the distributed build) or cargo build --release.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import kvaudit_exe

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def timed(cmd, runs, env=None, before=None):
    times = []
    for _ in range(runs):
        if before:
            before()
        t = time.perf_counter()
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        times.append(time.perf_counter() - t)
        if r.returncode not in (0, 1):
            sys.exit(f"{cmd} failed: {r.stderr.decode()}")
    return statistics.median(times), min(times), max(times)


def show(label, t, runs):
    print(f"{label:<44} median {t[0]*1000:6.0f} ms (min {t[1]*1000:.0f}, max {t[2]*1000:.0f}), {runs} runs")


def compare(exes, models, runs):
    builds = []
    for spec in exes:
        label, _, exe = spec.partition("=")
        if not label or not os.path.isfile(exe):
            sys.exit(f"error: --exe {spec}: expected LABEL=PATH to a binary")
        builds.append((label, exe))
    with tempfile.TemporaryDirectory() as tmp:
        times = {label: [] for label, _ in builds}
        for round in range(3 + runs):
            for label, exe in builds:
                env = dict(os.environ, KVAUDIT_TOKENIZER_CACHE=os.path.join(tmp, label))
                cmd = [exe, "check"] + [a for m in models for a in ("-m", m)]
                t = timed(cmd, 1, env)
                if round >= 3:
                    times[label].append(t[0])
    for label, t in times.items():
        show(f"kvaudit check, warm, {label}", (statistics.median(t), min(t), max(t)), runs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models-dir", default=os.path.join(ROOT, "..", "shared", "models"))
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--cold-runs", type=int, default=3)
    ap.add_argument("--python-runs", type=int, default=3)
    ap.add_argument("--exe", action="append", default=[], metavar="LABEL=PATH",
                    help="compare builds' warm runs, alternating (give two or more)")
    args = ap.parse_args()
    models = sorted(
        os.path.join(args.models_dir, d)
        for d in os.listdir(args.models_dir)
        if os.path.isfile(os.path.join(args.models_dir, d, "tokenizer.json"))
    )
    if args.exe:
        return compare(args.exe, models, args.runs)
    exe = kvaudit_exe.path()
    cmd = [exe, "check"] + [a for m in models for a in ("-m", m)]
    print(f"{len(models)} models from {args.models_dir}, {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        cache = os.path.join(tmp, "tokenizers")
        env = dict(os.environ, KVAUDIT_TOKENIZER_CACHE=cache)
        cold = timed(cmd, args.cold_runs, env, before=lambda: shutil.rmtree(cache, ignore_errors=True))
        # The cache is now full: warm runs.
        warm = timed(cmd, args.runs, env)
        size = sum(os.path.getsize(os.path.join(cache, f)) for f in os.listdir(cache))
    off = timed(cmd, args.cold_runs, dict(os.environ, KVAUDIT_TOKENIZER_CACHE="off"))
    py = timed([sys.executable, os.path.join(HERE, "check_reference.py")] + models, args.python_runs)
    show("kvaudit check, warm (prepared tokenizers)", warm, args.runs)
    show("kvaudit check, cold (prepare and write)", cold, args.cold_runs)
    show("kvaudit check, cache off (tokenizer.json)", off, args.cold_runs)
    show("python transformers, same work, one process", py, args.python_runs)
    print(f"prepared tokenizer cache: {size / 1e6:.0f} MB for {len(models)} models")
    print(f"ratio: {py[0]/warm[0]:.1f}x warm, {py[0]/cold[0]:.1f}x cold, {py[0]/off[0]:.1f}x cache off")


if __name__ == "__main__":
    main()
