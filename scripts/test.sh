#!/usr/bin/env bash
# The README's test command: the Rust tests, then the Python package's tests, then
# one line with the total ("ci: N passed, M failed").
set -euo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
trap 'rm -rf "$log"' EXIT
status=0
cargo test --workspace 2>&1 | tee "$log" || status=$?
scripts/python-tests.sh 2>&1 | tee -a "$log" || status=$?
# One line at the end that sums the ~110 "test result:" lines and pytest's summary.
awk -f scripts/count-tests.awk "$log"
exit "$status"
