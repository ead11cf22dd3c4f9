#!/usr/bin/env python3
"""Audit a sharded dataset on a Ray cluster: one Ray Data task per shard runs the installed
`kvaudit corpus --partial` on it, and the driver merges the partials with `kvaudit merge` into
the report one run over all the shards would print (every figure equal).

    pip install . "ray[data]"        # kvaudit's wheel (from a checkout) and Ray Data
    python3 examples/ray_corpus.py -m MODEL SHARD... [--workers N] [--format json] [-- CORPUS FLAGS]

MODEL is a model directory every node can read (a shared file system) or a Hub id each node
fetches into its own cache. Each task gets one CPU and runs `kvaudit corpus --jobs 1`; the
partial comes back to the driver as bytes in the task's result, so the nodes need no shared
file system for them. Flags after `--` go to every `kvaudit corpus` (they must be the same for
every shard, or the merge refuses the partials). Unless they give `--now`, the driver picks
one time for all tasks, so that a template that prints the date (Llama 3.x, gpt-oss) renders
every shard on the same day. The merged report goes to standard output; the timings
(conversations per second, the merge's cost) to standard error.

Ray's local mode (no cluster address) runs the tasks on this machine with --workers CPUs.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import ray


def audit_shard(row, kvaudit, model, extra):
    """One shard: `kvaudit corpus --partial` on this node; the partial's bytes and counts."""
    with tempfile.TemporaryDirectory() as tmp:
        partial = os.path.join(tmp, "partial.json")
        cmd = [kvaudit, "corpus", "-m", model, row["path"], "--jobs", "1",
               "--partial", partial, "--format", "json", *extra]
        started = time.perf_counter()
        run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        seconds = time.perf_counter() - started
        # 1 is a shard with rewrite points; 0 one without, or one whose rows were all skipped.
        if run.returncode not in (0, 1):
            raise RuntimeError(f"{' '.join(cmd)} exited {run.returncode}: {run.stderr.decode()}")
        with open(partial, "rb") as f:
            data = f.read()
    tally = json.loads(data)["tally"]
    return {"index": row["index"], "path": row["path"], "partial": data,
            "conversations": tally["conversations"], "rows": tally["rows"],
            "seconds": seconds}


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1:]
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("shards", nargs="+", help="shard files, in input order")
    ap.add_argument("--workers", type=int, default=os.cpu_count(),
                    help="tasks at once (in local mode: the CPUs Ray starts with)")
    ap.add_argument("--address", help="a Ray cluster to join (default: local mode)")
    ap.add_argument("--kvaudit", default=shutil.which("kvaudit"),
                    help="the kvaudit binary on every node (default: the one on PATH)")
    ap.add_argument("--format", default="human", choices=["human", "json", "markdown", "html"])
    args = ap.parse_args(argv)
    if not args.kvaudit:
        sys.exit("error: no kvaudit on PATH (pip install kvaudit's wheel, or give --kvaudit)")
    if not any(a == "--now" or a.startswith("--now=") for a in extra):
        extra += ["--now", time.strftime("%Y-%m-%dT%H:%M:%S")]

    if args.address:
        ray.init(address=args.address)
    else:
        ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False)
    model = args.model if not os.path.isdir(args.model) else os.path.abspath(args.model)
    shards = [{"index": i, "path": os.path.abspath(p)} for i, p in enumerate(args.shards)]

    started = time.perf_counter()
    ds = ray.data.from_items(shards, override_num_blocks=len(shards))
    done = ds.map(audit_shard, num_cpus=1, concurrency=args.workers,
                  fn_kwargs={"kvaudit": args.kvaudit, "model": model, "extra": extra})
    results = sorted(done.take_all(), key=lambda r: r["index"])
    audited = time.perf_counter() - started

    # The partials in shard order: the order decides ties, as the order of files does.
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for r in results:
            p = os.path.join(tmp, f"partial-{r['index']:06d}.json")
            with open(p, "wb") as f:
                f.write(r["partial"])
            paths.append(p)
        merge_started = time.perf_counter()
        merged = subprocess.run([args.kvaudit, "merge", *paths, "--format", args.format],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        merge_seconds = time.perf_counter() - merge_started
    if merged.returncode not in (0, 1):
        sys.exit(merged.stderr.decode().strip() or f"kvaudit merge exited {merged.returncode}")
    sys.stdout.buffer.write(merged.stdout)

    conversations = sum(r["conversations"] for r in results)
    partial_bytes = sum(len(r["partial"]) for r in results)
    print(f"{len(results)} shards, {conversations} conversations, {args.workers} workers: "
          f"{audited:.2f} s ({conversations / audited:.0f} conversations/s, task time "
          f"{sum(r['seconds'] for r in results):.2f} s); merge of {partial_bytes} bytes of "
          f"partials {merge_seconds * 1000:.0f} ms", file=sys.stderr)
    ray.shutdown()
    return merged.returncode


if __name__ == "__main__":
    sys.exit(main())
