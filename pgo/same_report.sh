#!/usr/bin/env bash
# The distributed binary is profile-guided (pgo/build-dist.sh) and the tests run the plain
# release build: both must give byte-identical reports on real traffic (JSON of every corpus
# file with three models, every capture). Run by .ci/run after the tests.
#
#   pgo/same_report.sh [PLAIN_EXE [DIST_EXE]]    (default: target/release/kvaudit, target/dist/kvaudit)
set -euo pipefail
cd "$(dirname "$0")/.."
exec scripts/same_reports.sh "${1:-target/release/kvaudit}" "${2:-target/dist/kvaudit}" --quick
