"""The kvaudit binary the benchmarks time: KVAUDIT_BENCH_EXE when set, else the distributed
build target/dist/kvaudit (pgo/build-dist.sh) when it exists, else the plain release build
target/release/kvaudit (`cargo build --release`). docs/benchmarks.md reports both builds."""
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def path():
    if os.environ.get("KVAUDIT_BENCH_EXE"):
        return os.environ["KVAUDIT_BENCH_EXE"]
    dist = os.path.join(ROOT, "target", "dist", "kvaudit")
    if os.path.isfile(dist):
        return dist
    return os.path.join(ROOT, "target", "release", "kvaudit")
