"""Helpers shared by the router drivers dynamo_indexer.py and http_router.py: the child process
each of them starts (the indexer, a router) and its log, stopping it on exit or on a signal, and
small utilities.

Both scripts are run as `python tests/routers/<script>.py` (dynamo_indexer.py re-executes itself by
its absolute path), so this directory is sys.path[0] and `from proc import ...` finds this file.
"""
import atexit
import ctypes
import functools
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile

CHILDREN = []


def strip_ansi(s):
    return re.sub(r"\x1b\[[0-9;]*m", "", s)


def fail(code, msg, log_path=None, *, prog, log_name, line_max=None):
    """Print `<prog>: error: <msg>` to stderr, then, when log_path names an existing file, its last
    30 lines (ANSI colours removed, each cut to line_max characters if given) under
    `--- <log_name> log (last lines) ---`; exit with `code`."""
    print(f"{prog}: error: {msg}", file=sys.stderr)
    if log_path and os.path.exists(log_path):
        tail = open(log_path, errors="replace").read().splitlines()[-30:]
        if tail:
            print(f"--- {log_name} log (last lines) ---", file=sys.stderr)
            for line in tail:
                print(strip_ansi(line)[:line_max], file=sys.stderr)
    sys.exit(code)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------------------------------
# Children


def set_pdeathsig():
    # The child (indexer, router) dies with this script even when the script is SIGKILLed
    # (PR_SET_PDEATHSIG).
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
    except OSError:
        pass
    os.setsid()


def spawn(cmd, env, log_prefix):
    """Start `cmd` in a session of its own that dies with this script, stdin from /dev/null,
    stdout and stderr to a new temporary log file (`<log_prefix>....log`, removed at exit), and
    add it to CHILDREN. Returns (the Popen, the log's path)."""
    log_fd, log_path = tempfile.mkstemp(prefix=log_prefix, suffix=".log")
    atexit.register(lambda: os.path.exists(log_path) and os.unlink(log_path))
    child = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log_fd, stderr=log_fd, env=env,
                             preexec_fn=set_pdeathsig)
    os.close(log_fd)
    CHILDREN.append(child)
    return child, log_path


def kill_children(grace):
    """SIGTERM the process group of each child still running, wait up to `grace` seconds for it
    to exit, then SIGKILL the group and wait."""
    for p in CHILDREN:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            try:
                p.wait(grace)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()


def on_signal(signum, _frame, grace):
    kill_children(grace)
    sys.exit(128 + signum)


def install_cleanup(grace):
    """Stop the children (kill_children(grace)) at exit and on SIGTERM or SIGINT, which then exit
    with 128 + the signal's number."""
    handler = functools.partial(on_signal, grace=grace)
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    atexit.register(kill_children, grace)
