#!/usr/bin/env bash
# A Python venv with a real ROS 2 (Kilted's rclpy on Fast DDS, and the std, sensor and
# service message packages) from PyPI, about 20 s: what the ROS 2 tests meet. Also the
# readers and writers of ROS recordings the tests check iox's against: MCAP's ROS 2
# reader (mcap-ros2-support) and rosbags (writes rosbag2 bags without ROS), and numpy.
#
#   scripts/ros-venv.sh DIR      # then IOX_ROS_VENV=DIR cargo test -p iox_ros2 -p iox_ros2_gateway
#
# DIR is made if missing and reused if it has them. Needs python3 with venv.
set -euo pipefail
dir=${1:?usage: $0 DIR}
python=${PYTHON:-python3}
[ -x "$dir/bin/python" ] || "$python" -m venv "$dir"
"$dir/bin/python" -m pip install -q --disable-pip-version-check \
    ros-rclpy ros-std-msgs ros-sensor-msgs ros-std-srvs ros-rmw-fastrtps-cpp \
    numpy mcap mcap-ros2-support rosbags
