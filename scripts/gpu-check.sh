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
#
# A GPU machine without a Rust toolchain runs a pack built elsewhere (same CPU
# architecture): `scripts/gpu-check.sh --pack DIR` builds the test executables and the
# examples in release mode and copies them (and the driver double) into DIR; then, on
# the GPU machine, from a checkout of the same tree, `IOX_GPU_PREBUILT=DIR
# scripts/gpu-check.sh` runs the same steps from DIR with no cargo call. The
# examples' test finds the example binaries by the absolute path they had where the
# pack was built (cargo's CARGO_BIN_EXE_*), so they are put back there first.
set -uo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
# The test executables a GPU check runs: package, test target.
gpu_tests=("iox_cuda double" "iox_cuda double_vmm" "iox_cuda device_memory" "iox_cuda driver"
    "iox_service gpu_double" "iox_service gpu_device" "iox_service gpu_device_recovery" "iox_service gpu_tensor" "iox_examples examples")
gpu_bins=(gpu_pinned gpu_measure gpu_device gpu_tensors)
if [ "${1:-}" = --pack ]; then
    dir=${2:?usage: scripts/gpu-check.sh --pack DIR}
    command -v jq >/dev/null || { echo "gpu-check --pack: needs jq (to read cargo's JSON)" >&2; exit 1; }
    mkdir -p "$dir/tests" "$dir/bin" && dir=$(cd "$dir" && pwd)
    cargo build --release -p iox_examples --features cuda --bins -q || exit 1
    cargo build --release -p iox_cuda_double -q || exit 1
    json=$(cargo test --release --no-run -q --message-format=json -p iox_service -p iox_cuda \
        -p iox_examples --features iox_examples/cuda,iox_service/cuda) || exit 1
    for t in "${gpu_tests[@]}"; do
        set -- $t
        exe=$(jq -r --arg p "$1" --arg n "$2" 'select(.reason == "compiler-artifact"
            and (.package_id | test("/" + $p + "#|#" + $p + "@"))
            and .target.name == $n and (.target.kind | index("test"))) | .executable' <<<"$json")
        [ -n "$exe" ] || { echo "no test executable for $t" >&2; exit 1; }
        cp "$exe" "$dir/tests/$2"
    done
    for b in "${gpu_bins[@]}"; do cp "target/release/$b" "$dir/bin/"; done
    cp target/release/libiox_cuda_double.so "$dir/"
    # The Python package (abi3), for the PyTorch step, where maturin is at hand.
    if command -v maturin >/dev/null; then
        (cd iox_python && maturin build -q --release --features cuda -o "$dir/wheel") || exit 1
    else
        echo "note: no maturin on PATH: the pack has no Python package (the PyTorch step will skip)" >&2
    fi
    echo "$PWD/target/release" >"$dir/bin-path"
    du -sh "$dir"
    exit 0
fi
pre=${IOX_GPU_PREBUILT:-}
if [ -n "$pre" ]; then
    pre=$(cd "$pre" && pwd)
    bins=$(cat "$pre/bin-path")
    mkdir -p "$bins" && cp "$pre"/bin/* "$bins/"
    export IOX_CUDA_DOUBLE_LIB="$pre/libiox_cuda_double.so"
fi
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
        echo "---- $name failed (rc $rc); its test results, then its last lines:" >&2
        grep -E '^test result' "$work/$name.log" >&2
        tail -n 40 "$work/$name.log" >&2
    fi
    return $rc
}

features=(--features iox_examples/cuda)
packages=(-p iox_service -p iox_cuda -p iox_examples -p iox_cuda_double)
if [ -z "$pre" ]; then
    step build-tests cargo test --no-run "${packages[@]}" "${features[@]}"
    step build-release cargo build --release -p iox_examples --features cuda --bins
    bins=target/release
fi

if [ "$mode" = double ]; then
    label="CUDA driver DOUBLE (no GPU): correctness only; figures are memcpy, not a GPU"
    lib=${IOX_CUDA_DOUBLE_LIB:-$PWD/target/debug/libiox_cuda_double.so}
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

# gpu_test PACKAGE FEATURES TEST... [-- ARGS]: cargo test, or the packed executables.
gpu_test() {
    local package=$1 feats=$2 tests=() args=() t
    shift 2
    while [ $# -gt 0 ] && [ "$1" != -- ]; do tests+=("$1"); shift; done
    [ $# -gt 0 ] && shift && args=("$@")
    if [ -z "$pre" ]; then
        cargo test -p "$package" $feats $(printf -- '--test %s ' "${tests[@]}") -- "${args[@]}"
    else
        local rc=0
        for t in "${tests[@]}"; do "$pre/tests/$t" "${args[@]}" || rc=1; done
        return $rc
    fi
}
step tests-iox_cuda gpu_test iox_cuda "" double double_vmm device_memory driver
step tests-iox_service-gpu gpu_test iox_service "--features cuda" gpu_double -- --nocapture
step tests-iox_service-device gpu_test iox_service "--features cuda" gpu_device gpu_device_recovery -- --nocapture
step tests-iox_service-tensor gpu_test iox_service "--features cuda" gpu_tensor -- --nocapture
step tests-examples-gpu gpu_test iox_examples "--features cuda" examples -- gpu
mkdir -p "$work/root"
# PyTorch reading a device service in place (iox_python/tests/test_gpu_torch.py):
# where python3 has torch and iox (the pack's wheel is installed for this run).
if [ -n "$pre" ] && compgen -G "$pre/wheel/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$work/site" "$pre"/wheel/*.whl \
        && export PYTHONPATH="$work/site${PYTHONPATH:+:$PYTHONPATH}"
fi
if [ "$mode" = real ] && python3 -c 'import iox, torch, pytest' 2>/dev/null; then
    step tests-python-torch env IOX_GPU_DEVICE_EXAMPLE="$bins/gpu_device" \
        python3 -m pytest -q -s -p no:cacheprovider iox_python/tests/test_gpu_torch.py
else
    rows+=("$(printf '%-34s %-6s %6s  (%s)' tests-python-torch skip - "needs a GPU, and python3 with torch, pytest and iox")")
fi
step example-gpu_pinned env IOX_ROOT="$work/root" "$bins/gpu_pinned" --count 32
step measure env IOX_ROOT="$work/root" "$bins/gpu_measure"
step example-gpu_device env IOX_ROOT="$work/root" "$bins/gpu_device" --count 32
step example-gpu_tensors env IOX_ROOT="$work/root" "$bins/gpu_tensors" --count 32
step measure-device env IOX_ROOT="$work/root" "$bins/gpu_device" --measure --count 64

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
