"""iox.ros2: rclpy message objects on CDR services and numpy views of images, in one
process and across two (a Python publisher process, this process subscribing).

Needs rclpy and the std and sensor message packages (scripts/python-tests.sh
installs them from PyPI); skips without them unless IOX_REQUIRE_ROS=1."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import iox

try:
    from sensor_msgs.msg import Image  # noqa: F401
    from std_msgs.msg import String
except ImportError as e:  # pragma: no cover - depends on the machine
    if os.environ.get("IOX_REQUIRE_ROS") == "1":
        raise
    pytest.skip(f"rclpy and the ROS message packages are not installed: {e}", allow_module_level=True)


def cdr_service(root, name="chatter"):
    return (iox.Service(name, root=root).publish_subscribe(bytes, max_len=4096)
            .attribute("ros2/type", "std_msgs/msg/String").open_or_create())


def test_messages_round_trip_as_cdr(tmp_path):
    svc = cdr_service(str(tmp_path))
    assert iox.ros2.message_class(svc) is String
    sub, pub = svc.subscriber(), svc.publisher()
    assert iox.ros2.send_message(pub, String(data="hello")) == 1
    sample = sub.receive()
    # The wire form ROS 2 uses: a CDR header, then the string with its length.
    assert np.asarray(sample.array).tobytes()[:4] == b"\x00\x01\x00\x00"
    assert iox.ros2.to_message(sample, String).data == "hello"


def test_unknown_types_are_named():
    with pytest.raises(ImportError, match="nonexistent_msgs"):
        iox.ros2.message_class("nonexistent_msgs/msg/Thing")
    with pytest.raises(ValueError, match="not a ROS type name"):
        iox.ros2.message_class("String")


def test_image_header_layout_is_rusts():
    dt = iox.ros2.IMAGE_HEADER.dtype
    # iox_ros2::image::ImageHeader: 184 bytes, 4-aligned, fields at these offsets.
    assert dt.itemsize == 184 and iox.ros2.IMAGE_HEADER.alignment == 4
    assert [dt.fields[f][1] for f in ("sec", "step", "is_bigendian", "encoding", "frame_id")] == [0, 16, 20, 24, 56]
    with pytest.raises(ValueError, match="at most 32"):
        iox.ros2.image_header(1, 1, "x" * 33)


def test_images_cross_processes_as_views_in_place(tmp_path):
    root = str(tmp_path)
    svc = (iox.Service("camera/front", root=root)
           .publish_subscribe(bytes, max_len=480 * 640 * 3, user_header=iox.ros2.IMAGE_HEADER).create())
    sub = svc.subscriber()
    producer = textwrap.dedent(f"""
        import numpy as np, iox
        svc = iox.Service("camera/front", root={root!r}).publish_subscribe(
            bytes, max_len=480 * 640 * 3, user_header=iox.ros2.IMAGE_HEADER).open()
        pub = svc.publisher()
        frame = (np.arange(480 * 640 * 3) % 251).astype(np.uint8)
        h = iox.ros2.image_header(480, 640, "rgb8", frame_id="camera", sec=7)
        assert pub.send(frame, header=h) == 1
    """)
    subprocess.run([sys.executable, "-c", producer], check=True, timeout=60)
    sample = sub.receive()
    view = iox.ros2.image_view(sample)
    assert view.shape == (480, 640, 3) and view.dtype == np.uint8
    assert int(sample.header["sec"]) == 7 and iox.ros2.text(sample.header, "frame_id") == "camera"
    expected = (np.arange(480 * 640 * 3) % 251).astype(np.uint8).reshape(480, 640, 3)
    assert np.array_equal(view, expected)
    # In place: the view's memory is the sample's.
    assert np.shares_memory(view, np.asarray(sample.array))
    assert not view.flags.writeable


def test_a_header_that_overruns_the_sample_is_refused(tmp_path):
    svc = (iox.Service("camera/bad", root=str(tmp_path))
           .publish_subscribe(bytes, max_len=64, user_header=iox.ros2.IMAGE_HEADER).create())
    sub, pub = svc.subscriber(), svc.publisher()
    pub.send(np.zeros(16, np.uint8), header=iox.ros2.image_header(100, 100, "mono8"))
    with pytest.raises(ValueError, match="100 rows of 100 bytes"):
        iox.ros2.image_view(sub.receive())
