#!/usr/bin/env bash
# The hot path's gate (benches/hotpath): instructions and shared-memory cache lines per
# message for publish-subscribe (typed, slice, user header, fan-out), request-response,
# the blackboard and a dropped loan, traced by valgrind in a release build and compared
# with benches/hotpath/costs.txt; fails when one rises. First it checks itself: one
# extra read of shared memory per receive must fail it. valgrind comes from Debian's
# package where the machine lacks it (CI is root); IOX_REQUIRE_VALGRIND=1 (CI) makes
# its absence a failure, otherwise the gate says it skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null ||
    { apt-get update -qq && apt-get install -y -qq valgrind >/dev/null; } ||
    echo "hotpath: valgrind could not be installed"
cargo build --release -q -p iox_hotpath
target/release/iox_hotpath --self-test
target/release/iox_hotpath --check
