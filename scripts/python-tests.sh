#!/usr/bin/env bash
# The Python package's tests (iox_python/tests, pytest) on a fresh machine: a new
# virtual environment, maturin, numpy, pytest and ROS 2's rclpy from PyPI, the extension built in
# place (`maturin develop`, into the workspace's target/), then pytest. Needs python3
# (3.9+, with venv) and cargo. The Rust example programs the interop tests run are
# built by the tests if `cargo test --workspace` has not built them already.
# IOX_PY_VENV=DIR reuses (or creates) a venv there instead of a temporary one.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
command -v "$python" >/dev/null || { echo "python-tests: $python not found (install Python 3.9+ with venv)" >&2; exit 1; }
venv=${IOX_PY_VENV:-}
if [ -z "$venv" ]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    # Readable by others: the README test runs its example as an unprivileged user.
    chmod 755 "$tmp"
    venv=$tmp/venv
fi
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
# rclpy and ROS message packages (ROS 2 Kilted from PyPI) for iox.ros2's tests.
"$venv/bin/python" -m pip install -q --disable-pip-version-check maturin numpy pytest mcap mcap-ros2-support \
    ros-rclpy ros-std-msgs ros-sensor-msgs ros-std-srvs ros-rmw-fastrtps-cpp
(cd iox_python && VIRTUAL_ENV=$venv PATH=$venv/bin:$PATH maturin develop -q --features cuda)
"$venv/bin/python" -m pytest -q -p no:cacheprovider iox_python/tests
