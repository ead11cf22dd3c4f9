#!/usr/bin/env bash
# Install Ray Data (examples/ray_corpus.py, run by tests/ray_example.rs) once per version into a
# virtual environment cached outside the repository; prints the environment's directory. The
# kvaudit the example runs is the wheel .ci/run installs into a fresh environment of its own.
set -euo pipefail
RAY="${KVAUDIT_RAY_VERSION:-2.60.0}"
CACHE="${KVAUDIT_RAY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kvaudit-ray}"
VENV="$CACHE/ray-$RAY"
CHECK='import ray, ray.data, pandas, pyarrow'
# Built in place (a virtual environment names its own path) and marked complete last.
if [ -f "$VENV/.complete" ] && "$VENV/bin/python" -c "$CHECK" >/dev/null 2>&1; then
    echo "$VENV"
    exit 0
fi
rm -rf "$VENV"
mkdir -p "$CACHE"
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "ray[data]==$RAY" >&2
"$VENV/bin/python" -c "$CHECK" >&2
touch "$VENV/.complete"
echo "$VENV"
