"""The kvaudit binary the benchmarks time: target/release/kvaudit, or the file that
KVAUDIT_BENCH_EXE names (another build of the same checkout, e.g. the plain one that
`KVAUDIT_PGO=0 CARGO_TARGET_DIR=target/plain cargo build --release` makes, to time a change
with the same script)."""
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def path():
    return os.environ.get("KVAUDIT_BENCH_EXE") or os.path.join(ROOT, "target", "release", "kvaudit")
