#!/usr/bin/env python3
"""Record the profile that the distributed build of kvaudit is compiled with (profile-guided
optimisation; see pgo/build-dist.sh, pgo/rustc-wrapper and docs/building.md).

    python3 pgo/train.py [--shared DIR] [--exclude-models a,b] [--out FILE]
    python3 pgo/train.py --heldout FILE     # only write the held-out benchmark corpus

1. Builds kvaudit with counters (-Cprofile-generate, dist profile) into
   target/pgo-instrumented.
2. Runs it on the workloads the benchmarks time, never on the benchmarks' own input files. The
   conversations of ../shared/corpus are split in two by the SHA-256 of their line (even first
   byte: training; odd: held out); training sees only its half (benches/corpus.py draws from
   both; --heldout below draws from the other half only):
   - `corpus` over the training half of every file of ../shared/corpus with every model of
     ../shared/models (less --exclude-models), JSON out, --jobs 2; one model also with the
     human report, --html and --per-transition;
   - `diff-turns` on the embedded conversation with every model, and on one 120-turn
     conversation drawn from the training half (benches/long_conversations.py's recipe, seed 7;
     the benchmark draws with seed 13 from all texts) with two models;
   - `replay` of the vLLM captures of ../shared/fixtures/vllm-events but s1.frames and
     s5.frames (benches/replay.py's inputs), and of a 500k-event stream from
     benches/replay.py's generator with seed 1 (the benchmark's: 20261129), at index block
     sizes 64 and 16,64;
   - `check` over every model, with a warm and with an empty prepared-tokenizer cache;
   - `render` with --tokens, and `keys`.
   The runs use a tokenizer cache of their own. A run that exits 2 stops the training.
3. Merges the counts with the llvm-profdata of rustc's LLVM version (llvm-profdata-N, or
   llvm-profdata when it is that version; Debian: apt-get install llvm-N) into
   pgo/kvaudit.profdata (sparse: only functions that ran) and writes the rustc it was recorded
   with into pgo/rustc-wrapper; pgo/build-dist.sh puts the profile's digest into the rustflags,
   so that the next dist build recompiles every crate with it. With --out, only that file is written
   (an experiment: the build does not use it).

--heldout FILE writes benches/corpus.py's 10,000-row corpus (seed 1) drawn from the held-out
half only, for `benches/corpus_builds.py REV... --corpus FILE`: the speed of a profile-guided
build on conversations its training never saw.
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
import corpus as corpus_bench  # noqa: E402
import long_conversations  # noqa: E402
import replay  # noqa: E402

PROFILE = os.path.join(HERE, "kvaudit.profdata")
NOW = ["--now", "2026-01-15T10:00:00"]
# benches/replay.py's inputs among the captures.
BENCH_CAPTURES = {"s1.frames", "s5.frames"}


def in_training(line):
    """The split of ../shared/corpus: a conversation (its line) is training data or held out."""
    return hashlib.sha256(line.rstrip("\n").encode("utf-8")).digest()[0] % 2 == 0


def rustc_info():
    rustc = os.environ.get("RUSTC", "rustc")
    out = subprocess.run([rustc, "-vV"], capture_output=True, text=True, check=True).stdout
    commit = re.search(r"^commit-hash: ([0-9a-f]{40})$", out, re.M)
    llvm = re.search(r"^LLVM version: (\d+)", out, re.M)
    if not commit or not llvm:
        sys.exit(f"error: `{rustc} -vV` names no commit hash or LLVM version")
    return commit.group(1), llvm.group(1), out.splitlines()[0]


def profdata_tool(major):
    candidates = [shutil.which(f"llvm-profdata-{major}"), shutil.which("llvm-profdata")]
    # rustup's llvm-tools component keeps one beside the toolchain's own libraries.
    sysroot = subprocess.run([os.environ.get("RUSTC", "rustc"), "--print", "sysroot"],
                             capture_output=True, text=True).stdout.strip()
    candidates += glob.glob(os.path.join(sysroot, "lib", "rustlib", "*", "bin", "llvm-profdata"))
    for path in filter(None, candidates):
        out = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
        if re.search(rf"LLVM version {major}\.", out):
            return path
    sys.exit(f"error: no llvm-profdata of LLVM {major} (rustc's); on Debian: apt-get install llvm-{major}, "
             "or rustup component add llvm-tools")


def build_instrumented(raw_dir):
    env = dict(os.environ)
    env.update(
        CARGO_TARGET_DIR=os.path.join(ROOT, "target", "pgo-instrumented"),
        RUSTFLAGS=f"-Cprofile-generate={raw_dir}",
        KVAUDIT_PGO="0",
    )
    subprocess.run(["cargo", "build", "--profile", "dist", "--locked"], cwd=ROOT, env=env, check=True)
    return os.path.join(ROOT, "target", "pgo-instrumented", "dist", "kvaudit")


class Runner:
    def __init__(self, exe, raw_dir, scratch):
        self.exe = exe
        self.env = dict(os.environ)
        # One file per process: concurrent runs never write the same file.
        self.env["LLVM_PROFILE_FILE"] = os.path.join(raw_dir, "kvaudit-%p-%m.profraw")
        self.env["KVAUDIT_TOKENIZER_CACHE"] = os.path.join(scratch, "tokenizers")
        self.count = 0

    def __call__(self, *args, env=None):
        r = subprocess.run([self.exe, *args], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, env=dict(self.env, **(env or {})))
        if r.returncode not in (0, 1):
            sys.exit(f"error: kvaudit {' '.join(args)} exited {r.returncode}: {r.stderr.decode()[-2000:]}")
        self.count += 1


def training_corpus(shared, scratch):
    """The training half of every file of ../shared/corpus, under the same names."""
    out_dir = os.path.join(scratch, "corpus")
    os.makedirs(out_dir)
    kept = 0
    for path in sorted(glob.glob(os.path.join(shared, "corpus", "*.jsonl"))):
        with open(path, encoding="utf-8") as f, \
                open(os.path.join(out_dir, os.path.basename(path)), "w", encoding="utf-8") as out:
            for line in f:
                if in_training(line):
                    out.write(line)
                    kept += 1
    if not kept:
        sys.exit(f"error: no conversations in {shared}/corpus")
    return out_dir


def train(run, shared, models, scratch):
    corpus_dir = training_corpus(shared, scratch)
    corpus_files = sorted(glob.glob(os.path.join(corpus_dir, "*.jsonl")))
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

    pools = long_conversations.text_pools(corpus_dir)
    long_path = os.path.join(scratch, "long.json")
    with open(long_path, "w", encoding="utf-8") as f:
        json.dump(long_conversations.build_conversation(120, 7, pools), f)
    for model in model_dirs[:2]:
        print(f"  long diff-turns: {os.path.basename(model)}", flush=True)
        run("diff-turns", "--model", model, "--conversation", long_path, *NOW, "--format", "json")

    print("  replay", flush=True)
    events = os.path.join(shared, "fixtures", "vllm-events")
    captures = sorted(p for p in glob.glob(os.path.join(events, "*.frames")) + glob.glob(os.path.join(events, "*.msgpack"))
                      if os.path.basename(p) not in BENCH_CAPTURES)
    generated = os.path.join(scratch, "generated.frames")
    replay.generate(generated, 500_000, seed=1)
    for blocks in ("64", "16,64"):
        for capture in captures + [generated]:
            run("replay", capture, "--index-block-size", blocks, "--format", "json")
    run("replay", generated, "--color", "never")

    print("  check", flush=True)
    check = ["check", *[a for m in model_dirs for a in ("-m", m)], "--color", "never"]
    run(*check)
    run(*check, env={"KVAUDIT_TOKENIZER_CACHE": os.path.join(scratch, "empty-cache")})


def replace_once(path, pattern, replacement):
    text = open(path, encoding="utf-8").read()
    text, n = re.subn(pattern, replacement, text, count=1, flags=re.M)
    if n != 1:
        sys.exit(f"error: {path} has no line matching {pattern}")
    open(path, "w", encoding="utf-8").write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    ap.add_argument("--exclude-models", default="")
    ap.add_argument("--out", help="write the profile here only (an experiment)")
    ap.add_argument("--heldout", metavar="FILE",
                    help="only write the benchmark corpus drawn from the held-out half")
    args = ap.parse_args()
    if not os.path.isdir(os.path.join(args.shared, "models")):
        sys.exit(f"error: {args.shared} has no models/: the training runs need ../shared")
    if args.heldout:
        corpus_bench.SHARED = args.shared
        pool = corpus_bench.build_corpus(args.heldout, 10000, 1, keep=lambda line: not in_training(line))
        print(f"{args.heldout}: 10000 conversations from {pool} held-out ones")
        return
    excluded = {m for m in args.exclude_models.split(",") if m}
    models = sorted(m for m in os.listdir(os.path.join(args.shared, "models"))
                    if os.path.isfile(os.path.join(args.shared, "models", m, "tokenizer.json"))
                    and m not in excluded)
    if not models:
        sys.exit("error: no models left to train with")
    # The long-conversation runs use the first two: the benchmarks' models when they are in.
    for preferred in ("llama-3.1-8b-instruct", "qwen3-8b"):
        if preferred in models:
            models.remove(preferred)
            models.insert(0, preferred)
    commit, major, version = rustc_info()
    tool = profdata_tool(major)
    out = args.out or PROFILE
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
        if not raws:
            sys.exit("error: the training runs wrote no counts")
        subprocess.run([tool, "merge", "--sparse", "-o", out, *raws], check=True)
    digest = hashlib.sha256(open(out, "rb").read()).hexdigest()[:16]
    print(f"{out}: {os.path.getsize(out):,} bytes from {run.count} runs, {version}, digest {digest}")
    if args.out:
        return
    replace_once(os.path.join(HERE, "rustc-wrapper"), r"^recorded_rustc=[0-9a-f]*$",
                 f"recorded_rustc={commit}")
    # The wheel's build (pyproject.toml) passes the digest as pgo/build-dist.sh does.
    replace_once(os.path.join(HERE, "..", "pyproject.toml"), r"kvaudit_pgo=\\\"[0-9a-f]*\\\"",
                 f'kvaudit_pgo=\\"{digest}\\"')


if __name__ == "__main__":
    main()
