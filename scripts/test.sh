#!/usr/bin/env bash
# The README's test command: the Rust tests, then the Python package's tests.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace
scripts/python-tests.sh
