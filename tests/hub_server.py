#!/usr/bin/env python3
"""A local stand-in for the Hugging Face Hub's file endpoint, for kvaudit's download tests.

Serves ROOT/<org>/<name>/<file> at /<org>/<name>/resolve/<revision>/<file> with the headers
hf-hub and huggingface_hub need (ETag, X-Repo-Commit, ranges answered with 206). Repositories
under the org `Gated` need `Authorization: Bearer <token>`. Every request is appended to LOG as
one JSON line. Prints the port on stdout once listening.

Repositories under the org `Hostile` misbehave as their name says, for the hostile-endpoint
tests: `redirect` sends every request to HUB_REDIRECT_TO (another server) with a 302,
`etag-escape` and `commit-dotdot`/`commit-abs` send path-like headers, `no-location` is a
302 without Location, `silent` never answers, `trickle` sends a byte every 0.2 s, `endless`
sends zeros forever, `html` answers the download with an HTML page. HUB_BIND picks the
address (default 127.0.0.1). A repository's `.commit` file, when a test writes one, is the
commit its revisions resolve to.
"""
import hashlib
import json
import os
import re
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT, LOG, TOKEN = sys.argv[1], sys.argv[2], sys.argv[3]
COMMIT = "0123456789abcdef0123456789abcdef01234567"
ROUTE = re.compile(r"^/(?:models/)?([^/]+)/([^/]+)/resolve/([^/]+)/(.+)$")


def repo_commit(repo_dir):
    """The commit a repository's branches point to: COMMIT, or what a test wrote into the
    repository's `.commit` file to move them (fetch --force)."""
    try:
        with open(os.path.join(repo_dir, ".commit"), encoding="utf-8") as fh:
            return fh.read().strip()
    except FileNotFoundError:
        return COMMIT


class Hub(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def record(self, status):
        with open(LOG, "a", encoding="utf-8") as fh:
            auth = self.headers.get("Authorization")
            fh.write(json.dumps({"method": self.command, "path": self.path, "status": status,
                                 "auth": auth is not None, "auth_ok": auth == f"Bearer {TOKEN}"}) + "\n")

    def fail(self, status, code):
        self.record(status)
        self.send_response(status)
        self.send_header("X-Error-Code", code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def hostile(self, mode, org_name_file, body_wanted):
        org, name, rev, file = org_name_file
        commit, etag = COMMIT, '"%s"' % ("e" * 64)
        if mode == "redirect":
            if not os.path.isfile(os.path.join(ROOT, "Org", "tiny", file)):
                return self.fail(404, "EntryNotFound")
            self.record(302)
            self.send_response(302)
            self.send_header("Location", f"{os.environ['HUB_REDIRECT_TO']}/Org/tiny/resolve/{rev}/{file}")
            self.send_header("X-Repo-Commit", COMMIT)
            # What the Hub sends for an LFS file: the target's sha256 as X-Linked-Etag.
            path = os.path.join(ROOT, "Org", "tiny", file)
            if os.path.isfile(path):
                with open(path, "rb") as fh:
                    self.send_header("X-Linked-Etag", '"%s"' % hashlib.sha256(fh.read()).hexdigest())
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if mode == "no-location":
            self.record(302)
            self.send_response(302)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if mode == "silent":
            self.record(0)
            time.sleep(30)
            return
        if mode == "etag-escape":
            etag = '"../../../../escaped-blob"'
        if mode == "commit-dotdot":
            commit = "../../../../escaped-commit"
        if mode == "commit-abs":
            commit = os.path.join(ROOT, "abs-commit")
        self.record(200)
        self.send_response(200)
        self.send_header("ETag", etag)
        self.send_header("X-Repo-Commit", commit)
        if mode == "html" and body_wanted:
            page = b"<html><body>Sign in</body></html>"
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)
            return
        if mode in ("trickle", "endless") and body_wanted:
            if mode == "trickle":
                self.send_header("Content-Length", "100000")
            self.send_header("Connection", "close")
            self.end_headers()
            try:
                while True:
                    if mode == "trickle":
                        self.wfile.write(b"{")
                        self.wfile.flush()
                        time.sleep(0.2)
                    else:
                        self.wfile.write(b"\0" * 65536)
            except (BrokenPipeError, ConnectionResetError):
                return
        body = b"{}"
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body_wanted:
            self.wfile.write(body)

    def serve(self, body_wanted):
        m = ROUTE.match(self.path)
        if not m:
            return self.fail(404, "RepoNotFound")
        org, name, _rev, file = m.groups()
        if org == "Hostile":
            return self.hostile(name, m.groups(), body_wanted)
        if org == "Gated" and self.headers.get("Authorization") != f"Bearer {TOKEN}":
            return self.fail(401, "GatedRepo")
        path = os.path.join(ROOT, org, name, file)
        if not os.path.isdir(os.path.join(ROOT, org, name)):
            return self.fail(404, "RepoNotFound")
        if not os.path.isfile(path):
            return self.fail(404, "EntryNotFound")
        with open(path, "rb") as fh:
            data = fh.read()
        start, end, status = 0, len(data) - 1, 200
        rng = self.headers.get("Range")
        if rng:
            a, _, b = rng.removeprefix("bytes=").partition("-")
            start = int(a)
            end = int(b) if b else len(data) - 1
            status = 206
        chunk = data[start:end + 1]
        self.record(status)
        self.send_response(status)
        self.send_header("ETag", '"%s"' % hashlib.sha256(data).hexdigest())
        self.send_header("X-Repo-Commit", repo_commit(os.path.join(ROOT, org, name)))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(len(chunk) if body_wanted else len(data)))
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        self.end_headers()
        if body_wanted:
            self.wfile.write(chunk)

    def do_GET(self):
        self.serve(True)

    def do_HEAD(self):
        self.serve(False)


server = ThreadingHTTPServer((os.environ.get("HUB_BIND", "127.0.0.1"), 0), Hub)
server.daemon_threads = True
print(server.server_address[1], flush=True)
server.serve_forever()
