#!/usr/bin/env bash
# Fuzzes every decoder of untrusted bytes (the `iox_fuzz` crate's targets) with
# libFuzzer for SECONDS each (default 30), starting from its committed corpus
# (fuzz/corpus/<target>); prints one line per target with its executions and time,
# and fails if any target crashed, hung or ran out of memory (the input is saved under
# target/fuzz/artifacts/<target>/, to be fixed and then committed to the corpus).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#
# Built by the stable toolchain: the coverage instrumentation libFuzzer feeds on is
# stable `-C` flags (no nightly sanitizer, no cargo-fuzz), with overflow checks and
# debug assertions on. Needs a C++ compiler (libFuzzer is built from source).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(mcap ros2msg cdr static_config attributes handover tensor_record smaps foxglove_sample foxglove_client)
host=$(rustc -vV | sed -n 's/^host: //p')
dir=target/fuzz
# The instrumentation applies to the target's crates only: naming --target keeps it
# out of build scripts and proc-macros, which run on the host.
RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks" \
CARGO_INCREMENTAL=0 cargo build -q --release -p iox_fuzz --features libfuzzer --bins \
    --target "$host" --target-dir "$dir"
status=0
for t in "${targets[@]}"; do
    bin=$dir/$host/release/fuzz_$t
    work=$dir/corpus/$t          # what the fuzzer finds joins a copy, not the repository
    art=$dir/artifacts/$t/
    mkdir -p "$work" "$art"
    log=$dir/$t.log
    # -rss_limit_mb / -malloc_limit_mb: an input that makes a decoder allocate what it
    # asks for fails; -timeout: one that makes it loop fails.
    if "$bin" "$work" "fuzz/corpus/$t" -max_total_time="$seconds" -rss_limit_mb=2048 \
        -malloc_limit_mb=512 -timeout=10 -artifact_prefix="$art" -print_final_stats=1 >"$log" 2>&1; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
        echo "fuzz $t: ok, ${runs:-?} executions in ${seconds} s"
    else
        status=1
        echo "fuzz $t: FAILED (input saved under $art); the fuzzer's report:"
        grep -E "ERROR|panicked|SUMMARY|Test unit written" "$log" | head -20 || tail -20 "$log"
    fi
done
exit "$status"
