#!/usr/bin/env bash
# Build the libFuzzer targets and run each for a while; exit 1 if any target crashes.
#
#   fuzz/run.sh                                  # every target, 60 s each
#   FUZZ_SECONDS=300 fuzz/run.sh                 # a longer campaign
#   FUZZ_TARGETS="decode_events replay_bytes" fuzz/run.sh
#
# Environment:
#   FUZZ_SECONDS    seconds per target (default 60)
#   FUZZ_TARGETS    space-separated targets (default: all, see TARGETS below)
#   FUZZ_SANITIZER  cargo fuzz --sanitizer (default none: the crate has no unsafe code, and
#                   without ASan each run is about twice as fast; use address to check anyway)
#   FUZZ_NO_BUILD=1 run what is already built
#   FUZZ_SEED       libFuzzer's -seed (default 0: a new one each run); CI fixes it so that a
#                   smoke run explores the same inputs every time
#   KVAUDIT_SHARED  real inputs to seed from (default ../shared beside the repository);
#                   a bounded sample is copied into the working corpus, never committed
#
# Works on stable Rust: RUSTC_BOOTSTRAP=1 lets cargo-fuzz pass its -Z flags. Installs
# cargo-fuzz from crates.io when it is missing. Working corpora (fuzz/corpus/<target>) are
# kept between runs and grow; crashing inputs go to fuzz/artifacts/<target>/. Minimise one
# with: RUSTC_BOOTSTRAP=1 cargo fuzz tmin --release -a -s none <target> <file>
# and add it to fuzz/regressions/<target>/ (tests/fuzz_regressions.rs replays those).
set -euo pipefail

FUZZ_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$FUZZ_DIR")"
SECONDS_EACH="${FUZZ_SECONDS:-60}"
SANITIZER="${FUZZ_SANITIZER:-none}"
SHARED="${KVAUDIT_SHARED:-$ROOT/../shared}"
TARGETS="${FUZZ_TARGETS:-decode_events frames_reader replay_bytes conversation_json template_render prepared_tokenizer zmtp_frames template_methods parquet_rows gguf_metadata corpus_partial server_request http_follower router_config}"

max_len() {
    case "$1" in
        template_render) echo 16384 ;;
        template_methods) echo 4096 ;;
        *) echo 65536 ;;
    esac
}

cd "$FUZZ_DIR"
# The Parquet, GGUF and partial targets write each input to a file (their readers take
# files): on tmpfs that costs a quarter of what it does on disk.
if [[ -z "${TMPDIR:-}" && -d /dev/shm && -w /dev/shm ]]; then
    export TMPDIR=/dev/shm
fi
if [[ "${FUZZ_NO_BUILD:-0}" != 1 ]]; then
    if ! cargo fuzz --version >/dev/null 2>&1; then
        echo "== installing cargo-fuzz"
        cargo install cargo-fuzz --locked
    fi
    echo "== building fuzz targets (release, debug assertions, sanitizer $SANITIZER)"
    RUSTC_BOOTSTRAP=1 cargo fuzz build --release --debug-assertions --sanitizer "$SANITIZER"
fi
TRIPLE="$(rustc -vV | sed -n 's/^host: //p')"
BIN_DIR="$FUZZ_DIR/target/$TRIPLE/release"

# A bounded sample of real inputs, when they are there (name: shared-<source>).
seed_shared() {
    local t="$1" dir="$2"
    [[ -d "$SHARED" ]] || return 0
    local ev="$SHARED/fixtures/vllm-events"
    case "$t" in
        frames_reader|replay_bytes)
            [[ -d "$ev" ]] || return 0
            find "$ev" -maxdepth 1 \( -name '*.frames' -o -name '*.msgpack' \) -size -64k \
                | sort | head -n 40 | while read -r f; do
                    cp "$f" "$dir/shared-$(basename "$f")"
                done
            ;;
        decode_events)
            [[ -d "$ev" ]] || return 0
            command -v python3 >/dev/null || return 0
            # Split .frames captures into single payloads (at most 8 per file).
            python3 - "$ev" "$dir" <<'PY'
import os, struct, sys
src, out = sys.argv[1], sys.argv[2]
for name in sorted(os.listdir(src)):
    if not name.endswith(".frames") or os.path.getsize(os.path.join(src, name)) > 256 << 10:
        continue
    data = open(os.path.join(src, name), "rb").read()
    at, n = 0, 0
    while at + 4 <= len(data) and n < 8:
        (tl,) = struct.unpack_from(">I", data, at); at += 4 + tl + 8
        if at + 4 > len(data): break
        (pl,) = struct.unpack_from(">I", data, at); at += 4
        payload = data[at:at + pl]; at += pl
        if len(payload) <= 65536:
            open(os.path.join(out, f"shared-{name}-{n}"), "wb").write(payload)
        n += 1
PY
            ;;
        conversation_json|template_render)
            command -v python3 >/dev/null || return 0
            # Three conversations from each corpus file, as {"messages": [...]} documents;
            # templates of at most 12 KiB, each followed by \0 and one conversation.
            python3 - "$SHARED" "$dir" "$t" <<'PY'
import glob, json, os, sys
shared, out, target = sys.argv[1:4]
convs = []
for path in sorted(glob.glob(os.path.join(shared, "corpus", "*.jsonl"))):
    with open(path, encoding="utf-8", errors="replace") as f:
        for i, line in zip(range(3), f):
            try:
                msgs = json.loads(line)["messages"]
            except Exception:
                continue
            doc = json.dumps({"messages": msgs}, ensure_ascii=False).encode()
            if len(doc) <= 8192:
                convs.append((f"{os.path.basename(path)}-{i}", doc))
if target == "conversation_json":
    for name, doc in convs:
        open(os.path.join(out, f"shared-{name}.json"), "wb").write(doc)
else:
    tpls = sorted(glob.glob(os.path.join(shared, "templates", "*.jinja")))
    tpls += sorted(glob.glob(os.path.join(shared, "models", "*", "chat_template.jinja")))
    small = [p for p in tpls if os.path.getsize(p) <= 12 << 10][:60]
    for k, p in enumerate(small):
        conv = convs[k % len(convs)][1] if convs else b""
        name = os.path.basename(os.path.dirname(p)) + "-" + os.path.basename(p)
        open(os.path.join(out, f"shared-{name}"), "wb").write(open(p, "rb").read() + b"\0" + conv)
PY
            ;;
    esac
}

status=0
summary=()
for t in $TARGETS; do
    bin="$BIN_DIR/$t"
    if [[ ! -x "$bin" ]]; then
        echo "no fuzz target $t (built: $(ls "$BIN_DIR" 2>/dev/null | tr '\n' ' '))" >&2
        exit 2
    fi
    corpus="$FUZZ_DIR/corpus/$t"
    artifacts="$FUZZ_DIR/artifacts/$t"
    mkdir -p "$corpus" "$artifacts"
    cp -n "$FUZZ_DIR/seeds/$t/"* "$corpus/" 2>/dev/null || true
    seed_shared "$t" "$corpus"
    log="$artifacts/last-run.log"
    marker="$artifacts/.started"
    touch "$marker"
    echo "== $t: ${SECONDS_EACH}s, $(ls "$corpus" | wc -l) corpus inputs"
    set +e
    "$bin" -max_total_time="$SECONDS_EACH" -seed="${FUZZ_SEED:-0}" -timeout=10 -rss_limit_mb=2048 \
        -max_len="$(max_len "$t")" -print_final_stats=1 \
        -artifact_prefix="$artifacts/" "$corpus" >"$log" 2>&1
    rc=$?
    set -e
    execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)"
    speed="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n1)"
    cov="$(grep -Eo 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -n1)"
    crashes="$(find "$artifacts" -newer "$marker" -type f \
        \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' -o -name 'leak-*' \) | wc -l)"
    line="$t: execs=${execs:-?} exec/s=${speed:-?} ${cov:-cov: ? ft: ?} crashes=$crashes exit=$rc"
    echo "$line"
    summary+=("$line")
    if [[ $rc -ne 0 || $crashes -ne 0 ]]; then
        status=1
        grep -E -m3 'panicked at|ERROR: libFuzzer|SUMMARY' "$log" | sed 's/^/    /' || true
        find "$artifacts" -newer "$marker" -type f ! -name last-run.log | sed 's/^/    artifact: /'
        echo "    log: $log"
    fi
done
echo "== summary"
printf '%s\n' "${summary[@]}"
exit $status
