#!/usr/bin/env python3
"""Record the profile that optimised builds of kvaudit are compiled with (profile-guided
optimisation; see pgo/rustc-wrapper and the README's "Profile-guided builds").

    python3 pgo/train.py [--shared DIR] [--exclude-models a,b] [--out FILE] [--no-update]

1. Builds kvaudit with counters (-Cprofile-generate, release profile) into
   target/pgo-instrumented.
2. Runs it on the workloads the benchmarks time, with real inputs from ../shared (never the
   benchmark files themselves):
   - `corpus` over every file of ../shared/corpus with every model of ../shared/models (less
     --exclude-models), JSON out, --jobs 2; one model also with the human report, --html and
     --per-transition;
   - `diff-turns` on the embedded conversation with every model, and on one long conversation
     (120 turns, drawn as benches/long_conversations.py draws them) with two models;
   - `replay` of every vLLM capture in ../shared/fixtures/vllm-events and of a generated
     500k-event stream (benches/replay.py's generator), at index block sizes 64 and 16,64;
   - `check` over every model, with the prepared-tokenizer cache warm and empty;
   - `render` with --tokens, and `keys`.
   A run that exits 2 (bad input, a bug) stops the training.
3. Merges the counts with the llvm-profdata of rustc's LLVM version (llvm-profdata-N, or
   llvm-profdata when it is that version; Debian: apt-get install llvm-N) into --out
   (default pgo/kvaudit.profdata, sparse: only functions that ran), and, unless --no-update,
   writes the LLVM version into pgo/rustc-wrapper and the profile's digest into
   .cargo/config.toml, so that the next optimised build recompiles everything with it.
"""
import argparse
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "benches"))
import long_conversations  # noqa: E402
import replay  # noqa: E402

NOW = ["--now", "2026-01-15T10:00:00"]


def llvm_major():
    out = subprocess.run(["rustc", "-vV"], capture_output=True, text=True, check=True).stdout
    m = re.search(r"^LLVM version: (\d+)", out, re.M)
    if not m:
        sys.exit("error: rustc -vV names no LLVM version")
    return m.group(1)


def profdata_tool(major):
    for name in (f"llvm-profdata-{major}", "llvm-profdata"):
        path = shutil.which(name)
        if not path:
            continue
        out = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
        if re.search(rf"LLVM version {major}\.", out):
            return path
    sys.exit(f"error: no llvm-profdata of LLVM {major} (rustc's); on Debian: apt-get install llvm-{major}")


def build_instrumented(raw_dir):
    env = dict(os.environ)
    env.update(
        CARGO_TARGET_DIR=os.path.join(ROOT, "target", "pgo-instrumented"),
        RUSTFLAGS=f"-Cprofile-generate={raw_dir}",
        KVAUDIT_PGO="0",
    )
    subprocess.run(["cargo", "build", "--release", "--locked"], cwd=ROOT, env=env, check=True)
    return os.path.join(ROOT, "target", "pgo-instrumented", "release", "kvaudit")


class Runner:
    def __init__(self, exe, raw_dir, scratch):
        self.exe = exe
        self.env = dict(os.environ)
        # One file per process: concurrent runs never write the same file.
        self.env["LLVM_PROFILE_FILE"] = os.path.join(raw_dir, "kvaudit-%p-%m.profraw")
        self.scratch = scratch
        self.count = 0

    def __call__(self, *args, env=None):
        run_env = dict(self.env, **(env or {}))
        r = subprocess.run([self.exe, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           env=run_env)
        if r.returncode not in (0, 1):
            sys.exit(f"error: kvaudit {' '.join(args)} exited {r.returncode}: {r.stderr.decode()[-2000:]}")
        self.count += 1


def train(run, shared, models, scratch):
    corpus_files = sorted(glob.glob(os.path.join(shared, "corpus", "*.jsonl")))
    model_dirs = [os.path.join(shared, "models", m) for m in models]
    for i, model in enumerate(model_dirs):
        print(f"  corpus, diff-turns: {os.path.basename(model)}", flush=True)
        run("corpus", "--model", model, *corpus_files, *NOW, "--format", "json", "--jobs", "2")
        run("diff-turns", "--model", model, *NOW, "--format", "json")
        run("diff-turns", "--model", model, *NOW, "--color", "never")
        if i == 0:
            run("corpus", "--model", model, *corpus_files, *NOW, "--jobs", "2", "--color", "never",
                "--html", os.path.join(scratch, "report.html"),
                "--per-transition", os.path.join(scratch, "transitions.jsonl"))
            run("render", "--model", model, *NOW, "--tokens", "--color", "never")
            run("keys", "--model", model, "--model-name", "org/model", *NOW, "--color", "never")

    pools = long_conversations.text_pools(os.path.join(shared, "corpus"))
    long_path = os.path.join(scratch, "long.json")
    with open(long_path, "w", encoding="utf-8") as f:
        json.dump(long_conversations.build_conversation(120, 13, pools), f)
    for model in model_dirs[:2]:
        print(f"  long diff-turns: {os.path.basename(model)}", flush=True)
        run("diff-turns", "--model", model, "--conversation", long_path, *NOW, "--format", "json")

    print("  replay", flush=True)
    captures = sorted(glob.glob(os.path.join(shared, "fixtures", "vllm-events", "*.frames"))
                      + glob.glob(os.path.join(shared, "fixtures", "vllm-events", "*.msgpack")))
    generated = os.path.join(scratch, "generated.frames")
    replay.generate(generated, 500_000)
    for blocks in ("64", "16,64"):
        for capture in captures + [generated]:
            run("replay", capture, "--index-block-size", blocks, "--format", "json")
    run("replay", generated, "--color", "never")

    print("  check", flush=True)
    check = ["check", *[a for m in model_dirs for a in ("-m", m)], "--color", "never"]
    run(*check)
    run(*check, env={"XDG_CACHE_HOME": os.path.join(scratch, "empty-cache")})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    ap.add_argument("--exclude-models", default="")
    ap.add_argument("--out", default=os.path.join(HERE, "kvaudit.profdata"))
    ap.add_argument("--no-update", action="store_true",
                    help="write the profile only (for an experiment), not the wrapper and config")
    args = ap.parse_args()
    if not os.path.isdir(os.path.join(args.shared, "models")):
        sys.exit(f"error: {args.shared} has no models/: the training runs need ../shared")
    excluded = {m for m in args.exclude_models.split(",") if m}
    models = sorted(m for m in os.listdir(os.path.join(args.shared, "models"))
                    if os.path.isfile(os.path.join(args.shared, "models", m, "tokenizer.json"))
                    and m not in excluded)
    # The long-conversation runs use the first two: the benchmarks' models when they are in.
    for preferred in ("qwen3-8b", "llama-3.1-8b-instruct"):
        if preferred in models:
            models.remove(preferred)
            models.insert(0, preferred)
    major = llvm_major()
    tool = profdata_tool(major)
    with tempfile.TemporaryDirectory() as tmp:
        raw_dir = os.path.join(tmp, "raw")
        os.makedirs(raw_dir)
        print("building with counters (target/pgo-instrumented)", flush=True)
        exe = build_instrumented(raw_dir)
        # Build scripts ran with counters too; only the runs below count.
        for f in glob.glob(os.path.join(raw_dir, "*.profraw")):
            os.remove(f)
        scratch = os.path.join(tmp, "scratch")
        os.makedirs(scratch)
        run = Runner(exe, raw_dir, scratch)
        print(f"training on {len(models)} models", flush=True)
        train(run, args.shared, models, scratch)
        raws = sorted(glob.glob(os.path.join(raw_dir, "*.profraw")))
        subprocess.run([tool, "merge", "--sparse", "-o", args.out, *raws], check=True)
    digest = hashlib.sha256(open(args.out, "rb").read()).hexdigest()[:16]
    print(f"{args.out}: {os.path.getsize(args.out):,} bytes from {run.count} runs, "
          f"LLVM {major}, digest {digest}")
    if args.no_update:
        return
    wrapper = os.path.join(HERE, "rustc-wrapper")
    text = open(wrapper, encoding="utf-8").read()
    text = re.sub(r"^recorded_llvm=\d*$", f"recorded_llvm={major}", text, count=1, flags=re.M)
    open(wrapper, "w", encoding="utf-8").write(text)
    config = os.path.join(ROOT, ".cargo", "config.toml")
    text = open(config, encoding="utf-8").read()
    text = re.sub(r'kvaudit_pgo=\\"[0-9a-f]*\\"', f'kvaudit_pgo=\\\\"{digest}\\\\"', text, count=1)
    open(config, "w", encoding="utf-8").write(text)


if __name__ == "__main__":
    main()
