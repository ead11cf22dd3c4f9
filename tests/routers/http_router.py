#!/usr/bin/env python3
"""Run a real HTTP router (vllm-router or smg, policy cache_aware) in front of two mock workers
and report where each turn of a conversation goes and what the router matched.

  python http_router.py --router vllm-router --case cases/long-reply.json
  python http_router.py --router smg --case cases/short-reply.json

Run it with the Python of the environment that .ci/routers.sh prints: the router's command is
taken from the same bin/ directory (or --bin DIR).

The case file is JSON {"turns": [{"messages": [...OpenAI chat messages...],
"prompt_token_ids": [...]}, ...]}. Two worker HTTP servers (A and B) run inside this script on
127.0.0.1, each on a port chosen at run time, and answer what the routers ask of a vLLM server:

  GET  /health, /health_generate       200
  GET  /v1/models                      one model (--model, default "kvaudit-mock")
  GET  /version                        {"version": "0.33.0"}
  GET  /metrics                        vLLM gauges, all 0 (both workers always idle)
  POST /v1/chat/completions/render     {"token_ids": the turn's prompt_token_ids}
  POST /tokenize                       {"tokens"/"token_ids": the same, "count", "max_model_len"}
  POST /v1/chat/completions            a fixed one-word reply

Anything else gets 404 (recorded under "probes"). A render or tokenize request is answered by
looking its "messages" up in the case (exact match on the messages' JSON, key order ignored); no
match is a 404 (counted in "render_misses"; vllm-router then falls back to least loaded).

The router runs on 127.0.0.1 (its HTTP and Prometheus ports chosen at run time) at debug log
level, with its default cache threshold (0.3) unless --cache-threshold is given. Turns are sent
one after the other, each only after the previous answer, so both workers always have zero
requests in flight and the balance rules never fire.

Output: one JSON object on stdout:
  {"router": "vllm-router", "version": "0.1.17", "workers": {"A": url, "B": url},
   "turns": [{"worker": "A"|"B", "match_rate": r, "matched_units": m, "input_units": n,
              "branch": ..., "log_line": "...", ...}, ...], "probes": {...}}

vllm-router's decision line ("Cache prefix decision stage=... selected=... match_rate=...")
carries only the rate; its units are tokens, input_units is the turn's rendered prompt length
and matched_units = round(match_rate * input_units) ("units_derived": true); the branch is the
outcome label (prefix_hit / prefix_miss / ...) of vllm_router_prefix_routing_decisions_total that
the turn incremented. smg's line ("Cache-aware selection index=... branch=... matched_ratio=...
matched_units=... input_units=...") carries them all, in characters of the request text.

Exit codes: 0 done; 2 bad input; 3 the router did not start or did not route a turn (the error and
the router's log tail go to stderr).
"""
import argparse
import json
import os
import re
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from proc import fail as proc_fail, free_port, install_cleanup, kill_children, spawn, strip_ansi

EXIT_INPUT = 2
EXIT_ROUTER = 3
VLLM_VERSION = "0.33.0"
REPLY = "ok"
# Seconds the router has to exit after SIGTERM before SIGKILL (smg keeps its listener open for a
# 5 s drain window after SIGTERM).
KILL_GRACE = 1.0


LOG_PATH = None


def fail(code, msg):
    proc_fail(code, msg, LOG_PATH, prog="http_router.py", log_name="router", line_max=600)


def canon(messages):
    return json.dumps(messages, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# ------------------------------------------------------------------------------------------
# Mock workers


class Worker:
    def __init__(self, name, model, turns):
        self.name = name
        self.model = model
        self.by_messages = {canon(t["messages"]): t["prompt_token_ids"] for t in turns}
        self.lock = threading.Lock()
        self.chats = []  # canonical messages of each chat completion received
        self.renders = 0
        self.tokenizes = 0
        self.render_misses = 0
        self.probes = {}
        # --hold-first-worker: a chat request for these messages blocks until `release` is set.
        self.hold_key = None
        self.held = threading.Event()
        self.release = threading.Event()
        worker = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def reply(self, code, body, ctype="application/json"):
                data = body if isinstance(body, bytes) else (
                    json.dumps(body) if ctype == "application/json" else body).encode()
                self.send_response(code)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def note(self, method, path):
                with worker.lock:
                    key = f"{method} {path}"
                    worker.probes[key] = worker.probes.get(key, 0) + 1

            def do_GET(self):
                path = self.path.split("?")[0]
                self.note("GET", path)
                if path in ("/health", "/health_generate"):
                    return self.reply(200, b"", "text/plain")
                if path == "/v1/models":
                    return self.reply(200, {"object": "list", "data": [{
                        "id": worker.model, "object": "model", "created": 0, "owned_by": "vllm",
                        "root": worker.model, "parent": None, "max_model_len": 32768}]})
                if path == "/version":
                    return self.reply(200, {"version": VLLM_VERSION})
                if path == "/metrics":
                    label = f'{{engine="0",model_name="{worker.model}"}}'
                    text = "".join(f"{m}{label} 0.0\n" for m in (
                        "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"))
                    return self.reply(200, text, "text/plain; version=0.0.4")
                return self.reply(404, {"error": f"not found: {path}"})

            def do_POST(self):
                path = self.path.split("?")[0]
                self.note("POST", path)
                try:
                    body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                except ValueError:
                    return self.reply(400, {"error": "bad json"})
                if path in ("/v1/chat/completions/render", "/tokenize"):
                    ids = worker.by_messages.get(canon(body.get("messages")))
                    with worker.lock:
                        if path == "/tokenize":
                            worker.tokenizes += 1
                        else:
                            worker.renders += 1
                        if ids is None:
                            worker.render_misses += 1
                    if ids is None:
                        return self.reply(404, {"error": "messages not in the case"})
                    if path == "/tokenize":
                        return self.reply(200, {"count": len(ids), "max_model_len": 32768,
                                                "tokens": ids, "token_ids": ids})
                    return self.reply(200, {"token_ids": ids})
                if path == "/v1/chat/completions":
                    key = canon(body.get("messages"))
                    if key == worker.hold_key:
                        worker.held.set()
                        worker.release.wait(120)
                        return self.reply(200, {"id": "hold", "object": "chat.completion",
                                                "created": int(time.time()), "model": worker.model, "choices": [
                                                    {"index": 0, "message": {"role": "assistant", "content": REPLY},
                                                     "finish_reason": "stop"}]})
                    with worker.lock:
                        worker.chats.append(key)
                    n = len(worker.by_messages.get(key, []))
                    return self.reply(200, {
                        "id": f"chatcmpl-{worker.name}-{len(worker.chats)}", "object": "chat.completion",
                        "created": int(time.time()), "model": worker.model,
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": REPLY},
                                     "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": n, "completion_tokens": 1, "total_tokens": n + 1}})
                return self.reply(404, {"error": f"not found: {path}"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


# ------------------------------------------------------------------------------------------
# Router process


def http(method, url, body=None, timeout=30.0):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"content-type": "application/json"} if data is not None else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def metrics(port, name):
    """{label-set: value} of one Prometheus counter."""
    try:
        _, text = http("GET", f"http://127.0.0.1:{port}/metrics", timeout=5.0)
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        if line.startswith(name + "{"):
            labels, _, value = line[len(name):].rpartition(" ")
            out[labels] = float(value)
    return out


def label(labels, key):
    m = re.search(key + r'="([^"]*)"', labels)
    return m.group(1) if m else labels


def kv_pairs(line):
    """key=value pairs of a tracing line (values bare or double-quoted)."""
    return {k: (v[1:-1] if v.startswith('"') else v)
            for k, v in re.findall(r'(\w+)=("[^"]*"|\S+)', line)}


def num(v):
    try:
        f = float(v)
    except (TypeError, ValueError):
        return v
    return int(f) if re.fullmatch(r"-?\d+", str(v)) else f


ROUTERS = {
    "vllm-router": {
        "decision": "Cache prefix decision",
        "metric": "vllm_router_prefix_routing_decisions_total",
        "metric_label": "outcome",
    },
    "smg": {
        "decision": "Cache-aware selection",
        "metric": "smg_cache_aware_policy_branch_total",
        "metric_label": "branch",
    },
}


def main():
    global LOG_PATH
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--router", required=True, choices=sorted(ROUTERS))
    ap.add_argument("--case", required=True, help='JSON {"turns": [{"messages", "prompt_token_ids"}, ...]}')
    ap.add_argument("--bin", default=os.path.dirname(sys.executable),
                    help="directory holding the vllm-router / smg commands (default: this Python's)")
    ap.add_argument("--model", default="kvaudit-mock")
    ap.add_argument("--cache-threshold", type=float, help="the router's --cache-threshold (default: its own, 0.3)")
    ap.add_argument("--startup-timeout", type=float, default=60.0)
    ap.add_argument("--request-timeout", type=float, default=30.0)
    ap.add_argument("--hold-first-worker", action="store_true",
                    help="while each later turn is routed, keep one request in flight on turn 1's worker "
                         "(breaks the tie of a least-loaded fallback: it then picks the other worker)")
    ap.add_argument("--keep-log", help="copy the router's log to this file")
    args = ap.parse_args()

    try:
        case = json.load(open(args.case))
        turns = case["turns"]
        assert isinstance(turns, list) and turns
        for t in turns:
            assert isinstance(t["messages"], list) and t["messages"]
            assert all(isinstance(x, int) for x in t["prompt_token_ids"])
    except (OSError, ValueError, KeyError, TypeError, AssertionError) as e:
        fail(EXIT_INPUT, f"{args.case}: not a case file ({type(e).__name__}: {e})")
    exe = os.path.join(args.bin, args.router)
    if not os.access(exe, os.X_OK):
        fail(EXIT_INPUT, f"no {exe}: run with the Python of the environment .ci/routers.sh prints, or pass --bin")

    install_cleanup(KILL_GRACE)

    workers = {"A": Worker("A", args.model, turns), "B": Worker("B", args.model, turns)}
    by_url = {w.url: name for name, w in workers.items()}
    port, prom = free_port(), free_port()
    base = f"http://127.0.0.1:{port}"
    common = ["--host", "127.0.0.1", "--port", str(port), "--prometheus-host", "127.0.0.1",
              "--prometheus-port", str(prom), "--worker-urls", workers["A"].url, workers["B"].url,
              "--policy", "cache_aware", "--log-level", "debug", "--worker-startup-check-interval", "1"]
    if args.cache_threshold is not None:
        common += ["--cache-threshold", str(args.cache_threshold)]
    if args.router == "smg":
        cmd = [exe, "launch", *common, "--shutdown-grace-period-secs", "0"]
    else:
        cmd = [exe, *common]
    env = dict(os.environ, NO_COLOR="1", RUST_LOG_STYLE="never")
    proc, LOG_PATH = spawn(cmd, env, f"{args.router}-")

    # Ready: vllm-router serves only once every worker is healthy; smg serves at once and
    # registers workers in the background, so wait for /readiness to count both.
    deadline = time.monotonic() + args.startup_timeout
    ready_path = "/readiness" if args.router == "smg" else "/health"
    while True:
        if proc.poll() is not None:
            fail(EXIT_ROUTER, f"{args.router} exited with code {proc.returncode} during start-up")
        try:
            status, text = http("GET", base + ready_path, timeout=2.0)
            if status == 200 and (args.router != "smg" or json.loads(text).get("healthy_workers") == 2):
                break
        except (OSError, ValueError):
            pass
        if time.monotonic() > deadline:
            fail(EXIT_ROUTER, f"{args.router} was not ready with both workers within {args.startup_timeout:g} s")
        time.sleep(0.05)

    spec = ROUTERS[args.router]

    def decision_lines(offset, want):
        """The first `want` complete decision lines written after `offset`, and the offset after them."""
        lines = []
        wait_until = time.monotonic() + 5.0
        while True:
            with open(LOG_PATH, "rb") as f:
                f.seek(offset)
                chunk = f.read()
            at = offset
            lines = []
            for raw in chunk.splitlines(keepends=True):
                if not raw.endswith(b"\n"):
                    break
                at += len(raw)
                if spec["decision"].encode() in raw:
                    lines.append(strip_ansi(raw.decode(errors="replace").rstrip("\n")))
                    if len(lines) == want:
                        return lines, at
            if time.monotonic() > wait_until:
                return lines, at
            time.sleep(0.05)

    out_turns = []
    log_at = os.path.getsize(LOG_PATH)
    first_worker = None
    for i, t in enumerate(turns):
        hold = None
        if (args.hold_first_worker and i > 0 and first_worker in workers
                and canon(t["messages"]) != canon(turns[0]["messages"])):
            # Turn 1's messages again, answered only after this turn: the router sends it to
            # turn 1's worker (full match), which then has one request in flight.
            for w in workers.values():
                w.hold_key, w.release = canon(turns[0]["messages"]), threading.Event()
                w.held.clear()

            def send_hold():
                try:
                    http("POST", base + "/v1/chat/completions",
                         {"model": args.model, "messages": turns[0]["messages"], "max_tokens": 1, "stream": False},
                         timeout=args.request_timeout + 120)
                except OSError:
                    pass

            hold = {"thread": threading.Thread(target=send_hold, daemon=True)}
            hold["thread"].start()
            wait_until = time.monotonic() + args.request_timeout
            while not any(w.held.is_set() for w in workers.values()):
                if time.monotonic() > wait_until:
                    fail(EXIT_ROUTER, f"turn {i + 1}: the hold request reached no worker")
                time.sleep(0.01)
            hold["worker"] = [n for n, w in workers.items() if w.held.is_set()][0]
            lines, log_at = decision_lines(log_at, 1)
            hold["log_line"] = lines[0] if lines else None
        before_chats = {n: len(w.chats) for n, w in workers.items()}
        before_renders = {n: (w.renders, w.tokenizes, w.render_misses) for n, w in workers.items()}
        before_metric = metrics(prom, spec["metric"])
        try:
            status, text = http("POST", base + "/v1/chat/completions",
                                {"model": args.model, "messages": t["messages"], "max_tokens": 1, "stream": False},
                                timeout=args.request_timeout)
        except OSError as e:
            fail(EXIT_ROUTER, f"turn {i + 1}: no answer from {args.router}: {e}")
        if status != 200:
            fail(EXIT_ROUTER, f"turn {i + 1}: {args.router} answered {status}: {text[:300]}")
        got = [n for n, w in workers.items() for _ in range(len(w.chats) - before_chats[n])]
        # The decision line is written before the request is forwarded; give the log a moment.
        lines, log_at = decision_lines(log_at, 1)
        line = lines[0] if lines else None
        after_metric = metrics(prom, spec["metric"])
        branch = [label(k, spec["metric_label"]) for k, v in after_metric.items() if v > before_metric.get(k, 0.0)]
        if hold:
            for w in workers.values():
                w.hold_key = None
                w.release.set()
            hold["thread"].join(args.request_timeout)
        rec = {
            "turn": i + 1,
            "worker": got[0] if len(got) == 1 else got,
            "input_tokens": len(t["prompt_token_ids"]),
        }
        pairs = kv_pairs(line[line.index(spec["decision"]):]) if line else {}
        if args.router == "vllm-router":
            rate = num(pairs.get("match_rate"))
            n = len(t["prompt_token_ids"])
            rec.update({
                "match_rate": rate,
                "matched_units": round(rate * n) if isinstance(rate, (int, float)) else None,
                "input_units": n,
                "units": "tokens",
                "units_derived": True,
                "match_rate_of": "selected worker",
                "branch": branch[0] if len(branch) == 1 else branch,
                "selected": pairs.get("selected"),
                "stage": pairs.get("stage"),
            })
        else:
            rec.update({
                "match_rate": num(pairs.get("matched_ratio")),
                "matched_units": num(pairs.get("matched_units")),
                "input_units": num(pairs.get("input_units")),
                "credited_units": num(pairs.get("credited_units")),
                "units": "chars",
                "match_rate_of": "best-matching worker",
                "branch": pairs.get("branch"),
                "selected": pairs.get("worker"),
                "index": pairs.get("index"),
                "threshold": num(pairs.get("threshold")),
            })
        rec["selected_worker"] = by_url.get(rec["selected"])
        rec["render_calls"] = {n: w.renders - before_renders[n][0] for n, w in workers.items()}
        rec["tokenize_calls"] = {n: w.tokenizes - before_renders[n][1] for n, w in workers.items()}
        rec["render_misses"] = sum(w.render_misses - before_renders[n][2] for n, w in workers.items())
        rec["log_line"] = line
        if hold:
            rec["hold"] = {"worker": hold["worker"], "log_line": hold["log_line"]}
        if i == 0 and len(got) == 1:
            first_worker = got[0]
        out_turns.append(rec)

    kill_children(KILL_GRACE)
    if args.keep_log:
        import shutil

        shutil.copyfile(LOG_PATH, args.keep_log)
    for w in workers.values():
        w.stop()
    try:
        from importlib.metadata import version

        ver = version(args.router)
    except Exception:
        ver = None
    print(json.dumps({
        "router": args.router,
        "version": ver,
        "policy": "cache_aware",
        "cache_threshold": args.cache_threshold,
        "hold_first_worker": args.hold_first_worker,
        "case": os.path.basename(args.case),
        "workers": {n: w.url for n, w in workers.items()},
        "turns": out_turns,
        "probes": {n: dict(sorted(w.probes.items())) for n, w in workers.items()},
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
