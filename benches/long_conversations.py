#!/usr/bin/env python3
"""Benchmark: `kvaudit diff-turns` on one long conversation (50, 100, 200 and 400 turns) against
the same computation in Python with transformers (benches/diff_turns_reference.py
--conversation: apply_chat_template + encode + common prefix per transition). Both sides are
whole processes, as a user runs them; medians of wall time and of CPU time (user + system),
since the machine may be shared. Every kvaudit run's held, next and common-prefix counts are
compared with transformers' before any time is reported.

    python3 benches/long_conversations.py [--turns 50,100,200,400] [--runs N] [--python-runs N]
        [--models llama-3.1-8b-instruct,qwen3-8b] [--seed 13]

Build first: pgo/build-dist.sh (the distributed build) or cargo build --release. The conversation is built deterministically (fixed seed)
from the user and assistant texts of ../shared/corpus (see build_conversation).
"""
import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import kvaudit_exe

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SHARED = os.path.join(ROOT, "..", "shared")
# Real chats with plain-text turns; agentic traces (tool calls) would need per-template
# tool-call handling on the reference side and add nothing to the cost being measured.
SOURCES = ["sharegpt-v3-sample.jsonl", "oasst1-en100.jsonl", "mt-bench-101.jsonl"]
# Longer texts are left out so that a 400-turn conversation stays far below kvaudit's bound
# on all prompts of one conversation (128 MiB); the median reply of the pool is ~600 bytes.
MAX_USER_CHARS = 1000
MAX_REPLY_CHARS = 2000


def text_pools(corpus_dir):
    users, replies = [], []
    for name in SOURCES:
        with open(os.path.join(corpus_dir, name), encoding="utf-8") as f:
            for line in f:
                for m in json.loads(line)["messages"]:
                    text = m.get("content")
                    if not isinstance(text, str) or not text.strip():
                        continue
                    if m["role"] == "user" and len(text) <= MAX_USER_CHARS:
                        users.append(text)
                    elif m["role"] == "assistant" and len(text) <= MAX_REPLY_CHARS:
                        replies.append(text)
    return users, replies


def build_conversation(turns, seed, pools):
    """A system prompt, then `turns` user/assistant pairs drawn with a fixed seed, then a
    final user message: `turns` transitions. Each reply carries `generated` (the model's text,
    the same as its content), so both sides hold exactly the same reply tokens."""
    users, replies = pools
    rng = random.Random(seed)
    messages = [{"role": "system", "content": "You are a helpful assistant."}]
    for _ in range(turns):
        messages.append({"role": "user", "content": rng.choice(users)})
        reply = rng.choice(replies)
        messages.append({"role": "assistant", "content": reply, "generated": reply})
    messages.append({"role": "user", "content": rng.choice(users)})
    return {"messages": messages}


def timed(cmd, runs, check=None):
    """Median wall and CPU (user + system) time of the child process over `runs` runs."""
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        walls.append(time.perf_counter() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
        if r.returncode not in (0, 1):
            sys.exit(f"{cmd} failed: {r.stderr.decode()}")
        if check:
            check(r.stdout)
    return statistics.median(walls), statistics.median(cpus)


def kvaudit_counts(stdout):
    report = json.loads(stdout)
    (conv,) = report["conversations"]
    return [
        [t["held_tokens"], t["next_prompt_tokens"], t["common_prefix_tokens"]]
        for t in conv["transitions"]
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", default="50,100,200,400")
    ap.add_argument("--models", default="llama-3.1-8b-instruct,qwen3-8b")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--python-runs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args()
    exe = kvaudit_exe.path()
    pools = text_pools(os.path.join(SHARED, "corpus"))
    print(f"{os.cpu_count()} cores; texts: {len(pools[0])} user, {len(pools[1])} assistant; seed {args.seed}")
    print(f"{'model':<24} {'turns':>5} {'prompt KB':>9} {'kvaudit wall':>12} {'cpu':>8} "
          f"{'transformers wall':>17} {'cpu':>8} {'ratio wall':>10} {'cpu':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models.split(","):
            model_dir = os.path.join(SHARED, "models", model)
            for turns in [int(n) for n in args.turns.split(",")]:
                path = os.path.join(tmp, f"long-{turns}.json")
                with open(path, "w", encoding="utf-8") as f:
                    json.dump(build_conversation(turns, args.seed, pools), f, ensure_ascii=False)
                reference = subprocess.run(
                    [sys.executable, os.path.join(HERE, "diff_turns_reference.py"), model_dir,
                     "--conversation", path],
                    stdout=subprocess.PIPE, check=True,
                ).stdout
                expected = json.loads(reference)
                cmd = [exe, "diff-turns", "--model", model_dir, "--conversation", path,
                       "--now", "2026-01-15T10:00:00", "--format", "json"]

                def check(stdout):
                    got = kvaudit_counts(stdout)
                    if got != expected["transitions"]:
                        first = next(i for i, (a, b) in enumerate(zip(got, expected["transitions"])) if a != b)
                        sys.exit(f"{model} {turns} turns: kvaudit differs from transformers at "
                                 f"transition {first + 1}: {got[first]} vs {expected['transitions'][first]}")

                # A first run prepares the tokenizer cache if needed.
                timed(cmd, 1, check)
                rust = timed(cmd, args.runs, check)
                py = timed([sys.executable, os.path.join(HERE, "diff_turns_reference.py"), model_dir,
                            "--conversation", path], args.python_runs)
                kb = expected["last_prompt_bytes"] / 1000
                print(f"{model:<24} {turns:>5} {kb:>9.0f} {rust[0]*1000:>9.0f} ms {rust[1]*1000:>5.0f} ms "
                      f"{py[0]*1000:>14.0f} ms {py[1]*1000:>5.0f} ms {py[0]/rust[0]:>9.1f}x {py[1]/rust[1]:>5.1f}x",
                      flush=True)
    print(f"medians: kvaudit {args.runs} runs, transformers {args.python_runs} runs per line; "
          "every kvaudit run matched transformers' held, next and common-prefix counts")


if __name__ == "__main__":
    main()
