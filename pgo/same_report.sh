#!/usr/bin/env bash
# The distributed binary is profile-guided (pgo/build-dist.sh) and the tests run the plain
# release build: both must give byte-identical reports on real traffic. Run by .ci/run after
# the tests.
#
#   pgo/same_report.sh [PLAIN_EXE [DIST_EXE]]    (default: target/release/kvaudit, target/dist/kvaudit)
set -euo pipefail
cd "$(dirname "$0")/.."
plain="${1:-target/release/kvaudit}"
release="${2:-target/dist/kvaudit}"
shared=../shared
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

# Exit 1 is a finding, not a failure.
report() {
    local name="$1"; shift
    local kind status
    for kind in plain release; do
        local exe="$plain"
        [ "$kind" = release ] && exe="$release"
        status=0
        "$exe" "$@" >"$out/$name.$kind" || status=$?
        if [ "$status" -gt 1 ]; then
            echo "error: $exe $* exited $status" >&2
            exit 2
        fi
    done
    if ! cmp -s "$out/$name.plain" "$out/$name.release"; then
        echo "error: $release and $plain differ on: $*" >&2
        exit 1
    fi
}

for model in qwen3-8b llama-3.1-8b-instruct gpt-oss-120b; do
    report "corpus-$model" corpus --model "$shared/models/$model" "$shared"/corpus/*.jsonl \
        --now 2026-01-15T10:00:00 --format json --jobs 2
done
n=0
for capture in "$shared"/fixtures/vllm-events/*.frames "$shared"/fixtures/vllm-events/*.msgpack; do
    report "replay-$n" replay "$capture" --index-block-size 16,64 --format json
    n=$((n + 1))
done
echo "profile-guided dist build and plain release build: identical corpus reports (3 models, $(cat "$shared"/corpus/*.jsonl | wc -l) conversations) and replay reports ($n captures)"
