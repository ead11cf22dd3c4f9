#!/usr/bin/env bash
# What reading Parquet would add (the README's figure): builds a scratch crate that depends only
# on the `parquet` crate without Arrow, with the codecs real chat dumps use (snappy, zstd), from
# clean at one job, and lists the crates it builds that kvaudit's Cargo.lock does not have.
#
#     bash benches/parquet_cost.sh [VERSION]     # default 57.3.2
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
version="${1:-57.3.2}"
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
parquet = { version = "=$version", default-features = false, features = ["snap", "zstd"] }
TOML
cd "$scratch"
start=$(date +%s.%N)
CARGO_BUILD_JOBS=1 cargo build --release --quiet --message-format short 2>&1 | tail -3
end=$(date +%s.%N)
new=()
while read -r name; do
    grep -qx "name = \"$name\"" "$root/Cargo.lock" || new+=("$name")
done < <(cargo tree --prefix none -e normal,build | sed 's/ v.*//' | sort -u | grep -vx parquet-cost)
printf 'parquet %s (no Arrow; snappy, zstd): clean release build at one job %.0f s\n' \
    "$version" "$(echo "$end - $start" | bc)"
printf '%d crates kvaudit does not have: %s\n' "${#new[@]}" "${new[*]}"
