"""Python with the C and C++ examples (iox_ffi/examples), each in its own process, on
the examples' service: a Python publisher to the C++ subscriber, the C publisher to a
Python subscriber. The examples are compiled with gcc/g++ by the `c_examples` fixture
(conftest.py). Frames with a user header between Python and the C++ `camera` example:
test_user_header.py. ROS 2 images between a C++ camera (iox_ros2.hpp) and Python's
one-line iox.ros2 ports: here, when rclpy is installed."""

import subprocess
import time

import numpy as np
import pytest

import iox

READING = iox.Type("iox_examples::Reading", np.dtype([("seq", "<u8"), ("value", "<f8")], align=True))


# The memory types whose pools C, C++ and Python all map as host memory: each side opens
# the service as it is (the C and C++ examples name no memory type).
MEMORY = [iox.MemoryType.CPU, iox.MemoryType.LOCKED, iox.MemoryType.CUDA_PINNED]


@pytest.mark.parametrize("memory", MEMORY, ids=lambda m: m.name)
def test_python_publisher_to_cpp_subscriber(root, c_examples, memory):
    svc = (iox.Service("examples/readings").publish_subscribe(READING).subscriber_buffer(16)
           .memory_type(memory).open_or_create())
    pub = svc.publisher()
    cpp = subprocess.Popen([str(c_examples / "cpp_subscriber"), "--count", "3"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert pub.wait_for_subscribers(1, 30.0) >= 1, "the C++ subscriber did not connect"
        for seq in range(3):
            with pub.loan() as s:
                s.array["seq"] = seq
                s.array["value"] = seq * 0.5
                assert s.send() == 1
        out, err = cpp.communicate(timeout=30)
    finally:
        cpp.kill()
    assert cpp.returncode == 0, err
    assert out.splitlines() == [f"cpp_subscriber: got seq {i} value {i * 0.5:.1f}" for i in range(3)]


@pytest.mark.parametrize("memory", MEMORY, ids=lambda m: m.name)
def test_c_publisher_to_python(root, c_examples, memory):
    svc = (iox.Service("examples/readings").publish_subscribe(READING).subscriber_buffer(16)
           .memory_type(memory).open_or_create())
    sub = svc.subscriber()
    c = subprocess.Popen([str(c_examples / "c_publisher"), "--count", "3"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        got = []
        while len(got) < 3:
            s = sub.receive(timeout=10.0)
            assert s is not None, "no reading from the C publisher within 10 s"
            got.append((int(s.array["seq"]), float(s.array["value"])))
            del s
        _, err = c.communicate(timeout=30)
    finally:
        c.kill()
    assert c.returncode == 0, err
    assert got == [(i, i * 0.5) for i in range(3)]


def _ros_image(seq):
    """Frame `seq` of the C++ `ros2_camera` example, as an rclpy Image."""
    from sensor_msgs.msg import Image

    n = 1080 * 1920 * 3
    m = Image(height=1080, width=1920, encoding="rgb8", step=1920 * 3,
              data=((np.arange(n, dtype=np.uint64) * 7 + seq) & 0xFF).astype(np.uint8).tobytes())
    m.header.stamp.sec, m.header.frame_id = seq, "camera"
    return m


def test_cpp_ros2_camera_to_a_python_subscription_and_back(root, c_examples):
    """A C++ ROS node's camera topic on iox (iox_ros2.hpp's ImageHeader, written in
    place) taken by Python's iox.ros2.Subscription as rclpy Images, and Python's
    iox.ros2.Publisher read by the C++ side: the same service either way round."""
    pytest.importorskip("sensor_msgs.msg", reason="rclpy and sensor_msgs are not installed")
    from sensor_msgs.msg import Image

    cam = subprocess.Popen([str(c_examples / "cpp_ros2_camera"), "publish", "--count", "3"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        sub = None
        end = time.monotonic() + 30
        while sub is None:
            try:
                sub = iox.ros2.Subscription(Image, "/camera/image", root=root)
            except iox.Error:
                assert time.monotonic() < end, "the C++ camera never made its service"
                time.sleep(0.01)
        got = [sub.take(timeout=30) for _ in range(3)]
        assert [m.header.stamp.sec for m in got] == [0, 1, 2]
        assert all(m == _ros_image(i) for i, m in enumerate(got))
        del sub
        _, err = cam.communicate(timeout=60)
        assert cam.returncode == 0, err
    finally:
        cam.kill()
    # The other way: Python publishes, the C++ side checks every pixel.
    pub = iox.ros2.Publisher(Image, "/camera/image", root=root)
    reader = subprocess.Popen([str(c_examples / "cpp_ros2_camera"), "subscribe", "--count", "2"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert reader.stdout.readline().strip() == "ready"
    for i in range(2):
        assert pub.publish(_ros_image(i)) == 1
    out, err = reader.communicate(timeout=60)
    assert reader.returncode == 0, err
    assert out.splitlines() == [f"cpp_ros2_camera: frame {i} 1920x1080 rgb8 ok" for i in range(2)]
