#!/usr/bin/env bash
# Build one Go harness of the project's own (harness/NAME: llm-d or gaie, each its own
# go.mod requiring that router's module from the Go module proxy, none of its code committed)
# once per version of its sources, into a cache outside the repository; prints the directory
# whose bin/ holds its commands. The tests (tests/llmd_real.rs, tests/gaie_real.rs) run them.
# About one to two minutes and 1 GB of Go's build cache the first time, nothing after.
#
#   llm-d  github.com/llm-d/llm-d-kv-cache (the index, the block keys, the event pool); the
#          later github.com/llm-d/llm-d-router is not served by the module proxy these
#          machines reach
#   gaie   sigs.k8s.io/gateway-api-inference-extension (its OpenAI parser, its prefix plugin)
#
# KVAUDIT_HARNESS_VERSION=vX.Y.Z builds it against another version of that module (one the
# proxy serves), from a copy: the repository's go.mod and go.sum are left as they are.
set -euo pipefail
NAME="${1:?usage: go-harness.sh llm-d|gaie}"
case "$NAME" in
    llm-d) MODULE=github.com/llm-d/llm-d-kv-cache ;;
    gaie) MODULE=sigs.k8s.io/gateway-api-inference-extension ;;
    *) echo "go-harness.sh: no harness $NAME" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/../harness/$NAME"
VERSION="${KVAUDIT_HARNESS_VERSION:-}"
CACHE="${KVAUDIT_GO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kvaudit-go}"
KEY="$( (echo "$VERSION"; cat go.mod go.sum; LC_ALL=C find . -name '*.go' | LC_ALL=C sort | xargs cat) \
    | sha256sum | cut -c1-16)"
OUT="$CACHE/$NAME/$KEY"
if [ -f "$OUT/.complete" ]; then
    echo "$OUT"
    exit 0
fi
rm -rf "$OUT"
mkdir -p "$OUT/bin"
if [ -n "$VERSION" ]; then
    WORK="$(mktemp -d)"
    trap 'rm -rf "$WORK"' EXIT
    cp -r . "$WORK/"
    cd "$WORK"
    go get "$MODULE@$VERSION" >&2
    go mod tidy >&2
fi
# No C: llm-d's tokenizer is a client of a sidecar, not linked in; GAIE needs none.
CGO_ENABLED=0 go build -trimpath -o "$OUT/bin/" ./... >&2
touch "$OUT/.complete"
echo "$OUT"
