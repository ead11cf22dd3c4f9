#!/usr/bin/env bash
# Build the distributed binary, target/dist/kvaudit: the `dist` profile (fat LTO, one codegen
# unit) compiled with the recorded profile pgo/kvaudit.profdata (profile-guided optimisation).
# The wheel and the release artifacts are built from it; `cargo build --release` stays an
# ordinary build.
#
#   pgo/build-dist.sh [CARGO ARGS...]       e.g. --target-dir DIR
#
# pgo/rustc-wrapper adds -Cprofile-use to the optimised compiles when the rustc is the one
# that recorded the profile (else the build is plain, and this says so). The profile's digest
# goes into the rustflags, so cargo rebuilds every crate when the profile changes.
set -euo pipefail
cd "$(dirname "$0")/.."
profile=pgo/kvaudit.profdata
digest="$(sha256sum "$profile" | cut -c1-16)"
recorded="$(sed -n 's/^recorded_rustc=//p' pgo/rustc-wrapper)"
current="$(rustc -vV | sed -n 's/^commit-hash: //p')"
if [ "$recorded" != "$current" ]; then
    echo "note: pgo/kvaudit.profdata was recorded with rustc $recorded, this is $current:" \
        "a plain dist build (record a new profile with python3 pgo/train.py)" >&2
fi
RUSTC_WRAPPER="$PWD/pgo/rustc-wrapper" cargo build --profile dist --locked \
    --config "build.rustflags=['--cfg', 'kvaudit_pgo=\"$digest\"']" "$@"
