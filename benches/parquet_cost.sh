#!/usr/bin/env bash
# What reading Parquet costs the build: builds a scratch crate that depends only on the
# `parquet` crate as kvaudit uses it (no Arrow; snappy, zstd, gzip through flate2's Rust backend,
# json) from clean at one job, and counts the crates of its tree. `BASE=REV` lists the ones the
# Cargo.lock of that commit did not have (e.g. BASE=033ded6, before Parquet was read).
#
#     bash benches/parquet_cost.sh [VERSION]     # default 60.2.0 (the version kvaudit uses)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
version="${1:-60.2.0}"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/src"
echo 'fn main() {}' > "$scratch/src/main.rs"
cat > "$scratch/Cargo.toml" <<TOML
[package]
name = "parquet-cost"
version = "0.0.0"
edition = "2024"

[dependencies]
parquet = { version = "=$version", default-features = false, features = ["snap", "zstd", "flate2-rust_backend", "json"] }
TOML
cd "$scratch"
start=$(date +%s.%N)
CARGO_BUILD_JOBS=1 cargo build --release --quiet --message-format short 2>&1 | tail -3
end=$(date +%s.%N)
new=()
base_lock=""
[ -n "${BASE:-}" ] && base_lock="$(git -C "$root" show "$BASE:Cargo.lock")"
while read -r name; do
    if [ -n "$base_lock" ]; then
        grep -qx "name = \"$name\"" <<< "$base_lock" || new+=("$name")
    fi
done < <(cargo tree --prefix none -e normal,build | sed 's/ v.*//' | sort -u | grep -vx parquet-cost)
printf 'parquet %s (no Arrow; snappy, zstd, gzip, json): clean release build at one job %.0f s\n' \
    "$version" "$(echo "$end - $start" | bc)"
printf '%d crates in its tree\n' "$(cargo tree --prefix none -e normal,build | sed 's/ v.*//' | sort -u | grep -vxc parquet-cost)"
if [ -n "${BASE:-}" ]; then
    printf '%d crates %s did not have: %s\n' "${#new[@]}" "$BASE" "${new[*]}"
fi
