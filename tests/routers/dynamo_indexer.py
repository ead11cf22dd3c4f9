#!/usr/bin/env python3
"""Replay a vLLM KV-event capture into NVIDIA Dynamo's real standalone indexer and query it.

Runs `python -m dynamo.indexer` (PyPI ai-dynamo-runtime, see .ci/routers.sh) in a network
namespace of its own, because the indexer's HTTP server binds 0.0.0.0: the script re-executes
itself under `unshare --net` and brings `lo` up there, so nothing is reachable from outside and
no port of the host is taken.

Inside, one ZMQ XPUB socket per publisher of the capture (one per topic of a `.frames` file; a
`.msgpack` file is one publisher with the empty topic) is bound on 127.0.0.1, and the indexer
is started with `--workers "1=tcp://...,2=tcp://..."` (worker ids 1, 2, ... in order of first
appearance). The capture's messages are then sent exactly as vLLM sends them: multipart
[topic, 8-byte big-endian sequence number, msgpack payload], the captured bytes unchanged, in
the capture's order.

To know when the indexer has applied them, one extra vLLM-form batch per worker follows the
capture: a BlockStored of one block of random token ids (at the indexer's block size, no parent),
sequence number last + 1. The indexer handles each worker's stream in order, so once /query
shows that block on the worker, every earlier message has been handled. A BlockRemoved of that
block follows, and the script waits until /query no longer shows it; the index then holds
exactly what the capture left. (The sentinel's two events are subtracted from the reported
`events_applied` counts.)

Then each lookup is sent as POST /query {token_ids, model_name} and one JSON object goes to
stdout:

  {"block_size": N, "workers": [...], "events_applied": {...}, "warnings": [...],
   "lookups": [{"tokens": len, "matched_tokens": M, "per_worker": {...}, "raw": {...}}, ...]}

`matched_tokens` is the largest score over the workers (the indexer reports tokens = matched
blocks x block size); `per_worker` maps each worker's topic (with ":dp_rank" when it is not 0) to
its score; `raw` is the indexer's answer as it came.

Usage (with the Python of the environment that .ci/routers.sh prints):
  python dynamo_indexer.py --capture s1.frames --block-size 16 --lookups lookups.json
  python dynamo_indexer.py --capture s1.frames --block-size 16 --truth-lookups

--lookups FILE is a JSON list of token-id lists. --truth-lookups builds them from the truth file
beside the capture (`<name>.json`): for each request, its prompt, prompt + reply[:-1] (what the
engine really holds after the request) and prompt + reply.

Exit codes: 0 done; 2 bad input or no network namespace; 3 the indexer did not start, did not
subscribe, or did not apply the sentinel in time (the error and the indexer's log tail go to
stderr).
"""
import argparse
import atexit
import json
import os
import random
import re
import shutil
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request

from proc import fail as proc_fail, free_port, install_cleanup, kill_children, spawn, strip_ansi

NETNS_ENV = "KVAUDIT_DYNAMO_NETNS"
EXIT_INPUT = 2
EXIT_ROUTER = 3
KILL_GRACE = 3  # seconds the indexer has to exit after SIGTERM before SIGKILL


def fail(code, msg, log_path=None):
    proc_fail(code, msg, log_path, prog="dynamo_indexer.py", log_name="indexer")


# ------------------------------------------------------------------------------------------
# Network namespace


def enter_netns():
    """Re-execute this script in a new network namespace (same process id: exec, no fork)."""
    if os.environ.get(NETNS_ENV) == "1":
        return
    unshare = shutil.which("unshare")
    if unshare is None:
        fail(EXIT_INPUT, "`unshare` (util-linux) is needed to run the indexer in its own network namespace")
    env = dict(os.environ, **{NETNS_ENV: "1"})
    # As root a plain network namespace; otherwise inside a user namespace of its own.
    userns = [] if os.geteuid() == 0 else ["--map-root-user"]
    argv = [unshare, "--net", *userns, "--", sys.executable, os.path.abspath(__file__), *sys.argv[1:]]
    try:
        os.execve(unshare, argv, env)
    except OSError as e:
        fail(EXIT_INPUT, f"cannot run unshare: {e}")


def loopback_up():
    ip = shutil.which("ip")
    if ip and subprocess.run([ip, "link", "set", "lo", "up"], capture_output=True).returncode == 0:
        return
    # No iproute2: set IFF_UP on lo with SIOCGIFFLAGS / SIOCSIFFLAGS.
    import fcntl

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifr = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s, 0x8913, ifr))[1]
        fcntl.ioctl(s, 0x8914, struct.pack("16sH14x", b"lo", flags | 0x1))


# ------------------------------------------------------------------------------------------
# Captures


def read_capture(path):
    """[(topic bytes, seq int, payload bytes)] from a .frames or a raw .msgpack capture."""
    data = open(path, "rb").read()
    if not data:
        fail(EXIT_INPUT, f"{path}: empty capture")
    msgs = []
    if data[0] == 0x00:  # .frames: u32be topic_len, topic, u64be seq, u32be payload_len, payload
        at = 0
        while at < len(data):
            if at + 4 > len(data):
                fail(EXIT_INPUT, f"{path}: truncated frame header at byte {at}")
            (tl,) = struct.unpack_from(">I", data, at)
            if at + 16 + tl > len(data):
                fail(EXIT_INPUT, f"{path}: truncated frame at byte {at}")
            topic = data[at + 4 : at + 4 + tl]
            (seq,) = struct.unpack_from(">Q", data, at + 4 + tl)
            (pl,) = struct.unpack_from(">I", data, at + 12 + tl)
            if at + 16 + tl + pl > len(data):
                fail(EXIT_INPUT, f"{path}: truncated payload at byte {at}")
            msgs.append((topic, seq, data[at + 16 + tl : at + 16 + tl + pl]))
            at += 16 + tl + pl
    else:  # raw concatenated msgpack values: one publisher, empty topic, seq 0, 1, ...
        import msgpack

        up = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=len(data) + 1)
        up.feed(data)
        start = 0
        for _ in up:
            end = up.tell()
            msgs.append((b"", len(msgs), data[start:end]))
            start = end
    return msgs


def describe_batch(payload):
    """(number of events, dp rank) of a vLLM KVEventBatch payload; (0, 0) if it is not one."""
    import msgpack

    try:
        b = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    except Exception:
        return 0, 0
    if isinstance(b, (list, tuple)) and len(b) >= 2 and isinstance(b[1], (list, tuple)):
        dp = b[2] if len(b) >= 3 and isinstance(b[2], int) else 0
        return len(b[1]), dp
    return 0, 0


def sentinel_payloads(block_size, dp_rank, rng):
    """A BlockStored of one fresh block and the BlockRemoved of it, as vLLM >= 0.24 encodes them."""
    import msgpack

    tokens = [rng.randrange(1 << 20, 1 << 31) for _ in range(block_size)]
    h = rng.randrange(1 << 62, 1 << 63)
    stored = {
        "type": "BlockStored",
        "block_hashes": [h],
        "parent_block_hash": None,
        "token_ids": tokens,
        "block_size": block_size,
        "lora_id": None,
        "medium": "GPU",
        "lora_name": None,
    }
    removed = {"type": "BlockRemoved", "block_hashes": [h], "medium": "GPU"}
    now = time.time()
    return (
        tokens,
        msgpack.packb([now, [stored], dp_rank], use_bin_type=True),
        msgpack.packb([now, [removed], dp_rank], use_bin_type=True),
    )


# ------------------------------------------------------------------------------------------
# HTTP


def http(port, method, path, body=None, timeout=10.0):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=data, method=method,
        headers={"content-type": "application/json"} if data is not None else {},
    )
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.read().decode()


def query(port, tokens, model):
    status, text = http(port, "POST", "/query", {"token_ids": tokens, "model_name": model})
    return json.loads(text)


def score(answer, worker_id, dp_rank):
    return int(answer.get("scores", {}).get(str(worker_id), {}).get(str(dp_rank), 0))


def applied_counts(port):
    _, text = http(port, "GET", "/metrics")
    out = {}
    for line in text.splitlines():
        m = re.match(r'dynamo_kvrouter_kv_cache_events_applied\{event_type="(\w+)",status="(\w+)"\} (\S+)', line)
        if m and float(m.group(3)):
            out[f"{m.group(1)}:{m.group(2)}"] = int(float(m.group(3)))
    return out


# ------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--capture", required=True, help=".frames or .msgpack vLLM KV-event capture")
    ap.add_argument("--block-size", type=int, required=True, help="the indexer's --block-size")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--lookups", help="JSON list of token-id lists to query")
    g.add_argument("--truth-lookups", action="store_true",
                   help="query each request's prompt, prompt+reply[:-1], prompt+reply from <capture>.json")
    ap.add_argument("--model-name", default="default")
    ap.add_argument("--startup-timeout", type=float, default=30.0,
                    help="seconds for the indexer to answer /health and subscribe to every publisher")
    ap.add_argument("--apply-timeout", type=float, default=30.0,
                    help="seconds for the indexer to apply the capture (sentinel seen and removed)")
    ap.add_argument("--keep-log", help="copy the indexer's log to this file")
    args = ap.parse_args()
    if args.block_size <= 0:
        fail(EXIT_INPUT, "--block-size must be positive")
    try:
        import msgpack  # noqa: F401
        import zmq  # noqa: F401
        import dynamo.llm  # noqa: F401
    except ImportError as e:
        fail(EXIT_INPUT, f"{e}: run with the Python of the environment .ci/routers.sh prints")

    # Read the inputs before entering the namespace so that mistakes are reported plainly.
    try:
        msgs = read_capture(args.capture)
        lookups = json.load(open(args.lookups)) if args.lookups else None
    except (OSError, ValueError) as e:
        fail(EXIT_INPUT, str(e))
    if lookups is None:
        truth = os.path.splitext(args.capture)[0] + ".json"
        if not os.path.exists(truth):
            fail(EXIT_INPUT, f"--truth-lookups: no truth file {truth}")
        lookups = []
        for r in json.load(open(truth)).get("requests", []):
            p, o = r["prompt_token_ids"], r["output_token_ids"]
            lookups += [p, p + o[:-1], p + o]
    if not isinstance(lookups, list) or not all(
        isinstance(x, list) and all(isinstance(t, int) and 0 <= t < 1 << 32 for t in x) for x in lookups
    ):
        fail(EXIT_INPUT, "lookups must be a JSON list of lists of u32 token ids")

    enter_netns()
    try:
        loopback_up()
    except OSError as e:
        fail(EXIT_INPUT, f"cannot bring lo up in the new network namespace: {e}")

    import zmq

    install_cleanup(KILL_GRACE)

    # One publisher (worker) per topic, in order of first appearance.
    workers = []
    by_topic = {}
    for topic, seq, payload in msgs:
        if topic not in by_topic:
            by_topic[topic] = len(workers)
            workers.append({"id": len(workers) + 1, "topic": topic, "dp_rank": None,
                            "messages": 0, "events": 0, "last_seq": -1})
        w = workers[by_topic[topic]]
        n, dp = describe_batch(payload)
        w["messages"] += 1
        w["events"] += n
        w["last_seq"] = max(w["last_seq"], seq)
        if w["dp_rank"] is None:
            w["dp_rank"] = dp

    ctx = zmq.Context()
    atexit.register(ctx.destroy, 0)
    for w in workers:
        w["dp_rank"] = w["dp_rank"] or 0
        sock = ctx.socket(zmq.XPUB)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.SNDHWM, 0)
        w["port"] = sock.bind_to_random_port("tcp://127.0.0.1")
        w["sock"] = sock

    http_port = free_port()
    spec = ",".join(f"{w['id']}:{w['dp_rank']}={'tcp://127.0.0.1:%d' % w['port']}" for w in workers)
    env = dict(os.environ, DYN_SDK_DISABLE_ANSI_LOGGING="1", NO_COLOR="1")
    env.pop(NETNS_ENV, None)
    cmd = [sys.executable, "-m", "dynamo.indexer", "--block-size", str(args.block_size),
           "--port", str(http_port), "--threads", "1", "--model-name", args.model_name,
           "--workers", spec]
    proc, log_path = spawn(cmd, env, "dynamo-indexer-")

    # Start-up: /health answers and every XPUB has seen its subscription.
    deadline = time.monotonic() + args.startup_timeout
    while True:
        if proc.poll() is not None:
            fail(EXIT_ROUTER, f"the indexer exited with code {proc.returncode} during start-up", log_path)
        try:
            if http(http_port, "GET", "/health", timeout=1.0)[0] == 200:
                break
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            fail(EXIT_ROUTER, f"the indexer did not answer /health within {args.startup_timeout:g} s", log_path)
        time.sleep(0.05)
    for w in workers:
        while not w["sock"].poll(50):
            if proc.poll() is not None:
                fail(EXIT_ROUTER, f"the indexer exited with code {proc.returncode} before subscribing", log_path)
            if time.monotonic() > deadline:
                fail(EXIT_ROUTER, f"the indexer did not subscribe to worker {w['id']} within "
                     f"{args.startup_timeout:g} s", log_path)
        w["sock"].recv()  # the subscription message
    time.sleep(0.05)

    # The capture, as captured.
    for topic, seq, payload in msgs:
        workers[by_topic[topic]]["sock"].send_multipart([topic, seq.to_bytes(8, "big"), payload])

    # Sentinels: stored, seen on /query, removed, gone from /query.
    rng = random.Random(int.from_bytes(os.urandom(8), "big"))
    deadline = time.monotonic() + args.apply_timeout
    for w in workers:
        tokens, stored, removed = sentinel_payloads(args.block_size, w["dp_rank"], rng)
        seq = w["last_seq"] + 1
        w["sock"].send_multipart([w["topic"], seq.to_bytes(8, "big"), stored])
        for want_present, then in ((True, removed), (False, None)):
            while (score(query(http_port, tokens, args.model_name), w["id"], w["dp_rank"]) > 0) != want_present:
                if proc.poll() is not None:
                    fail(EXIT_ROUTER, f"the indexer exited with code {proc.returncode} while applying", log_path)
                if time.monotonic() > deadline:
                    fail(EXIT_ROUTER, f"the indexer did not apply worker {w['id']}'s events within "
                         f"{args.apply_timeout:g} s", log_path)
                time.sleep(0.02)
            if then is not None:
                seq += 1
                w["sock"].send_multipart([w["topic"], seq.to_bytes(8, "big"), then])

    applied = applied_counts(http_port)
    for key in ("stored:ok", "removed:ok"):
        applied[key] = applied.get(key, 0) - len(workers)
        if applied[key] == 0:
            del applied[key]

    results = []
    for tokens in lookups:
        raw = query(http_port, tokens, args.model_name)
        per_worker = {}
        for w in workers:
            name = w["topic"].decode("utf-8", "replace")
            if w["dp_rank"]:
                name += f":{w['dp_rank']}"
            per_worker[name] = score(raw, w["id"], w["dp_rank"])
        results.append({"tokens": len(tokens), "matched_tokens": max(per_worker.values(), default=0),
                        "per_worker": per_worker, "raw": raw})

    kill_children(KILL_GRACE)
    log = [strip_ansi(l) for l in open(log_path, errors="replace").read().splitlines()]
    if args.keep_log:
        shutil.copyfile(log_path, args.keep_log)
    warnings = []
    for line in log:
        m = re.search(r"\b(WARN|ERROR)\b\s+(.*)", line)
        if m:
            text = m.group(1) + " " + m.group(2)
            if text not in warnings:
                warnings.append(text)

    out = {
        "router": "dynamo.indexer (ai-dynamo-runtime)",
        "block_size": args.block_size,
        "capture": os.path.basename(args.capture),
        "workers": [{"id": w["id"], "topic": w["topic"].decode("utf-8", "replace"), "dp_rank": w["dp_rank"],
                     "messages": w["messages"], "events": w["events"]} for w in workers],
        "events_applied": applied,
        "warnings": warnings[:50],
        "lookups": results,
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
