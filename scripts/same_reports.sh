#!/usr/bin/env bash
# Two kvaudit binaries must write byte-identical reports on real traffic: every
# ../shared/corpus file with three models, in every format, with the default router and with
# every router (and the remedies); every capture of ../shared/fixtures/vllm-events replayed
# through llm-d and Dynamo, JSON, human and Prometheus. Used for refactors (build the starting
# commit, keep its binary outside the tree, compare) and by pgo/same_report.sh for the
# profile-guided build.
#
#   scripts/same_reports.sh BEFORE_EXE AFTER_EXE [--quick]
#
# --quick: JSON only, all corpus files at once (what pgo/same_report.sh ran before).
# Exit 0 identical, 1 a report differs (the first difference is named), 2 a run crashed.
set -euo pipefail
cd "$(dirname "$0")/.."
before="${1:?usage: scripts/same_reports.sh BEFORE_EXE AFTER_EXE [--quick]}"
after="${2:?usage: scripts/same_reports.sh BEFORE_EXE AFTER_EXE [--quick]}"
quick="${3:-}"
shared=../shared
if [ ! -d "$shared/corpus" ]; then
    echo "error: $shared/corpus is missing: nothing to compare" >&2
    exit 2
fi
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
runs=0

# Exit codes, reports and warnings must all agree; a refusal (exit 2) too, but a crash
# (any other code) is a failure.
report() {
    local name="$1"; shift
    local side exe status
    for side in before after; do
        exe="$before"
        [ "$side" = after ] && exe="$after"
        status=0
        "$exe" "$@" >"$out/$name.$side" 2>"$out/$name.$side.err" || status=$?
        if [ "$status" -gt 2 ]; then
            echo "error: $exe $* exited $status: $(head -n 1 "$out/$name.$side.err")" >&2
            exit 2
        fi
        echo "$status" >>"$out/$name.$side"
    done
    if ! cmp -s "$out/$name.before" "$out/$name.after"; then
        echo "error: $before and $after differ on: $*" >&2
        diff "$out/$name.before" "$out/$name.after" | head -n 20 >&2 || true
        exit 1
    fi
    if ! cmp -s "$out/$name.before.err" "$out/$name.after.err"; then
        echo "error: $before and $after write different warnings on: $*" >&2
        diff "$out/$name.before.err" "$out/$name.after.err" | head -n 20 >&2 || true
        exit 1
    fi
    runs=$((runs + 1))
}

models=(qwen3-8b llama-3.1-8b-instruct gpt-oss-120b)
all_routers=(--router llm-d --router llm-d-approx --router dynamo --router dynamo-approx
    --router vllm-router --router sglang --router gaie:block_size=16 --remedies)
fixed=(--now 2026-01-15T10:00:00 --jobs 2)

if [ "$quick" = --quick ]; then
    for model in "${models[@]}"; do
        report "corpus-$model" corpus --model "$shared/models/$model" "$shared"/corpus/*.jsonl \
            "${fixed[@]}" --format json
    done
else
    for file in "$shared"/corpus/*.jsonl; do
        base="$(basename "$file" .jsonl)"
        for model in "${models[@]}"; do
            report "corpus-$base-$model-json" corpus --model "$shared/models/$model" "$file" \
                "${fixed[@]}" --format json
            for format in json human markdown html; do
                report "corpus-$base-$model-$format-routers" corpus --model "$shared/models/$model" \
                    "$file" "${fixed[@]}" --format "$format" "${all_routers[@]}"
            done
        done
        report "corpus-$base-vllm-server" corpus --model "$shared/models/qwen3-8b" "$file" \
            "${fixed[@]}" --format json --server vllm --block-sizes 16,32,64
    done
    for model in "${models[@]}"; do
        report "diff-turns-$model" diff-turns --model "$shared/models/$model" --format json \
            "${all_routers[@]}"
        report "diff-turns-$model-human" diff-turns --model "$shared/models/$model" \
            "${all_routers[@]}"
    done
fi

n=0
for capture in "$shared"/fixtures/vllm-events/*.frames "$shared"/fixtures/vllm-events/*.msgpack; do
    report "replay-$n" replay "$capture" --index-block-size 16,64 --format json
    if [ "$quick" != --quick ]; then
        report "replay-$n-routers" replay "$capture" --router llm-d --router dynamo --keep-going \
            --format json
        report "replay-$n-human" replay "$capture" --router llm-d --router dynamo --keep-going
        report "replay-$n-prom" replay "$capture" --keep-going --format prometheus
    fi
    n=$((n + 1))
done
echo "identical: $runs reports (exit codes and warnings included) of $before and $after:" \
    "$(cat "$shared"/corpus/*.jsonl | wc -l) conversations, 3 models, $n captures"
