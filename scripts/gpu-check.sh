#!/usr/bin/env bash
# One command that proves iox's GPU paths: builds and runs the CUDA tests (issue 18's
# 1-11 and the pinner's own; the device-memory pools' across processes), the
# gpu_pinned and gpu_device examples, and the measurements (examples/src/bin/
# gpu_measure.rs; gpu_device --measure: two processes on one device, 16 MiB tensors,
# hand-off latency and throughput against cuMemcpyDtoD in one process and against the
# CudaPinned host path), then prints one summary table. Exits non-zero on
# any failure, including a run past its 5-minute budget.
#
# On a machine with an NVIDIA driver (libcuda.so.1 loadable) everything runs against
# it, with IOX_REQUIRE_GPU=1 (a test that skips for want of a GPU fails) and
# IOX_CUDA_DRIVER=real (the tests' children load the installed driver; call-log
# assertions, which need the double, are left out and said so). Without one it runs
# against the CUDA driver double (cuda_double/, a test-only library), clearly
# labelled: then the figures are the double's (memcpy), not a GPU's.
#   scripts/gpu-check.sh            # auto: real driver if present, else the double
#   IOX_GPU_CHECK=double scripts/gpu-check.sh   # force the double
set -uo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
budget=300
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rows=()
failed=0

has_driver() {
    [ -e /proc/driver/nvidia/version ] || ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'
}
mode=${IOX_GPU_CHECK:-auto}
if [ "$mode" = auto ]; then
    if has_driver; then mode=real; else mode=double; fi
fi

# step NAME COMMAND...: runs it, logs to $work/NAME.log, records pass/fail and time.
step() {
    local name=$1 t0 rc
    shift
    t0=$(date +%s)
    "$@" >"$work/$name.log" 2>&1
    rc=$?
    local took=$(($(date +%s) - t0))
    if [ $rc -eq 0 ]; then
        rows+=("$(printf '%-34s %-6s %5ss' "$name" ok "$took")")
    else
        rows+=("$(printf '%-34s %-6s %5ss  (see below)' "$name" FAIL "$took")")
        failed=1
        echo "---- $name failed (rc $rc), last lines:" >&2
        tail -n 40 "$work/$name.log" >&2
    fi
    return $rc
}

features=(--features iox_examples/cuda)
packages=(-p iox_service -p iox_cuda -p iox_examples -p iox_cuda_double)
export CARGO_TERM_COLOR=never
step build-tests cargo test --no-run "${packages[@]}" "${features[@]}"
step build-release cargo build --release -p iox_examples --features cuda --bins

if [ "$mode" = double ]; then
    label="CUDA driver DOUBLE (no GPU): correctness only; figures are memcpy, not a GPU"
    lib="$PWD/target/debug/libiox_cuda_double.so"
    mkdir -p "$work/driver"
    ln -sf "$lib" "$work/driver/libcuda.so"
    ln -sf "$lib" "$work/driver/libcuda.so.1"
    # Every process of the run loads the double, the test processes themselves too
    # (so the in-process GPU test of iox_cuda runs on it).
    export LD_LIBRARY_PATH="$work/driver${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export IOX_CUDA_DRIVER=double
else
    label="real CUDA driver"
    export IOX_CUDA_DRIVER=real
fi
# A skip for want of a GPU is a failure, against the double too (it is a GPU to iox).
export IOX_REQUIRE_GPU=1

step tests-iox_cuda cargo test -p iox_cuda --test double --test double_vmm --test device_memory --test driver
step tests-iox_service-gpu cargo test -p iox_service --features cuda --test gpu_double -- --nocapture
step tests-iox_service-device cargo test -p iox_service --features cuda --test gpu_device -- --nocapture
step tests-examples-gpu cargo test -p iox_examples --features cuda --test examples gpu
mkdir -p "$work/root"
step example-gpu_pinned env IOX_ROOT="$work/root" target/release/gpu_pinned --count 32
step measure env IOX_ROOT="$work/root" target/release/gpu_measure
step example-gpu_device env IOX_ROOT="$work/root" target/release/gpu_device --count 32
step measure-device env IOX_ROOT="$work/root" target/release/gpu_device --measure --count 64

value() { awk -v k="$1" '$1 == "measure" && $2 == k { print $3 }' "$work/measure.log"; }
total=$(($(date +%s) - start))
if [ "$total" -gt "$budget" ]; then
    rows+=("$(printf '%-34s %-6s %5ss  (budget %ss)' "time budget" FAIL "$total" "$budget")")
    failed=1
fi

echo
echo "== iox gpu-check: $label =="
[ "$mode" = double ] || echo "device: $(value device | tr _ ' ')"
printf '%-34s %-6s %6s\n' STEP RESULT TIME
printf '%s\n' "${rows[@]}"
if [ -s "$work/measure.log" ] && grep -q '^measure h2d_ratio' "$work/measure.log"; then
    echo
    printf '%-34s %s\n' MEASUREMENT "VALUE ($( [ "$mode" = double ] && echo 'DOUBLE, not a GPU' || echo "$(value device | tr _ ' ')"))"
    printf '%-34s %s GB/s\n' "H2D 16 MiB, pinned pool" "$(value h2d_pinned_gbs)"
    printf '%-34s %s GB/s\n' "H2D 16 MiB, unpinned pool" "$(value h2d_pageable_gbs)"
    printf '%-34s %sx (target >= 2x on a GPU)\n' "pinned / unpinned" "$(value h2d_ratio)"
    printf '%-34s %s ms\n' "registration per GiB" "$(value register_ms_per_gib)"
    printf '%-34s %s ms vs %s ms steady (%sx)\n' "first 16 MiB sample after create" \
        "$(value first_sample_ms)" "$(value steady_sample_ms)" "$(value first_sample_ratio)"
    printf '%-34s %s ns (asking the driver: %s ns)\n' "Sample::device_ptr per sample" \
        "$(value device_ptr_ns)" "$(value driver_lookup_ns)"
fi
if [ -s "$work/measure-device.log" ] && grep -q '^device hand-off' "$work/measure-device.log"; then
    echo
    echo "DEVICE POOLS (CudaDevice), two processes, 16 MiB tensors ($( [ "$mode" = double ] && echo 'DOUBLE, not a GPU' || echo 'this GPU'))"
    grep -E '^(device hand-off|device pipeline|cuMemcpyDtoD|CudaPinned host path)' "$work/measure-device.log"
fi
grep -h 'device_ptr_makes_no_driver_call_per_sample:' "$work"/tests-iox_service-gpu.log 2>/dev/null | sed 's/^/note: /'
grep -h '^NOTE ' "$work"/tests-*.log 2>/dev/null | sort -u | sed 's/^/note: /'
echo "total ${total}s; $([ $failed -eq 0 ] && echo PASS || echo FAIL)"
exit $failed
