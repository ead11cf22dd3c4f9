#!/usr/bin/env bash
# Build the Go harness of harness/llm-d (llm-d's own packages, from the Go module proxy, called
# by tests/llmd_real.rs) once per version of its sources, into a cache outside the repository;
# prints the directory whose bin/ holds the commands. About two minutes and 1 GB of Go's build
# cache the first time, nothing after.
#
# llm-d's module is github.com/llm-d/llm-d-kv-cache (the index, the block keys, the event pool);
# the later github.com/llm-d/llm-d-router is not served by the module proxy these machines
# reach. Point the harness at another version with KVAUDIT_LLMD_VERSION (a version the proxy
# serves); the cache key follows it.
set -euo pipefail
cd "$(dirname "$0")/../harness/llm-d"
VERSION="${KVAUDIT_LLMD_VERSION:-}"
CACHE="${KVAUDIT_GO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kvaudit-go}"
KEY="$( (echo "$VERSION"; cat go.mod go.sum; LC_ALL=C find . -name '*.go' | LC_ALL=C sort | xargs cat) \
    | sha256sum | cut -c1-16)"
OUT="$CACHE/llm-d/$KEY"
if [ -f "$OUT/.complete" ] && [ -x "$OUT/bin/keys" ]; then
    echo "$OUT"
    exit 0
fi
rm -rf "$OUT"
mkdir -p "$OUT/bin"
if [ -n "$VERSION" ]; then
    # Another version: built from a copy, the repository's go.mod and go.sum left as they are.
    WORK="$(mktemp -d)"
    trap 'rm -rf "$WORK"' EXIT
    cp -r . "$WORK/"
    cd "$WORK"
    go get "github.com/llm-d/llm-d-kv-cache@$VERSION" >&2
    go mod tidy >&2
fi
# No C: llm-d's tokenizer is a client of a sidecar, not linked in.
CGO_ENABLED=0 go build -trimpath -o "$OUT/bin/" ./... >&2
touch "$OUT/.complete"
echo "$OUT"
