#!/usr/bin/env python3
"""A local stand-in for the Hugging Face Hub's file endpoint, for kvaudit's download tests.

Serves ROOT/<org>/<name>/<file> at /<org>/<name>/resolve/<revision>/<file> with the headers
hf-hub and huggingface_hub need (ETag, X-Repo-Commit, ranges answered with 206). Repositories
under the org `Gated` need `Authorization: Bearer <token>`. Every request is appended to LOG as
one JSON line. Prints the port on stdout once listening.
"""
import hashlib
import json
import os
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT, LOG, TOKEN = sys.argv[1], sys.argv[2], sys.argv[3]
COMMIT = "0123456789abcdef0123456789abcdef01234567"
ROUTE = re.compile(r"^/(?:models/)?([^/]+)/([^/]+)/resolve/([^/]+)/(.+)$")


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

    def serve(self, body_wanted):
        m = ROUTE.match(self.path)
        if not m:
            return self.fail(404, "RepoNotFound")
        org, name, _rev, file = m.groups()
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
        self.send_header("X-Repo-Commit", COMMIT)
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


server = ThreadingHTTPServer(("127.0.0.1", 0), Hub)
print(server.server_address[1], flush=True)
server.serve_forever()
