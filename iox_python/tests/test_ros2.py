"""iox.ros2: rclpy message objects on CDR services and numpy views of images, in one
process and across two (a Python publisher process, this process subscribing).

Needs rclpy and the std and sensor message packages (scripts/python-tests.sh
installs them from PyPI); skips without them unless IOX_REQUIRE_ROS=1."""
import os
import shutil
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import iox

try:
    from sensor_msgs.msg import Image, JointState, PointCloud2  # noqa: F401
    from std_msgs.msg import String
    from std_srvs.srv import SetBool, Trigger  # noqa: F401
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


# --- Through the gateway: an rclpy talker, iox-ros2, and Python iox subscribers ----------

PEER = os.path.join(os.path.dirname(__file__), "..", "..", "iox_ros2_gateway", "tests", "ros_peer.py")


@pytest.fixture(scope="module")
def gateway_binary():
    """`iox-ros2`, built here if `cargo test --workspace` did not build it."""
    from conftest import REPO
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target"))
    path = os.path.join(target, "debug", "iox-ros2")
    if not os.path.exists(path):
        subprocess.run(["cargo", "build", "-q", "-p", "iox_ros2_gateway", "--bin", "iox-ros2"], cwd=REPO, check=True)
    return path


def in_netns(root, script):
    """Runs `script` (shell) in a new network namespace with only loopback up: DDS
    stays inside it, shared memory (the iox root) does not."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        if os.environ.get("IOX_REQUIRE_ROS") == "1":
            raise RuntimeError("a network namespace needs root and unshare")
        pytest.skip("a network namespace needs root and unshare (util-linux)")
    env = dict(os.environ, IOX_ROOT=root)
    return subprocess.Popen(["unshare", "--net", "sh", "-c", "ip link set lo up && " + script],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_open(builder_fn, timeout=60):
    end = time.monotonic() + timeout
    while True:
        try:
            return builder_fn()
        except iox.Error:
            if time.monotonic() > end:
                raise
            time.sleep(0.01)


def test_rclpy_talker_to_python_subscribers_through_the_gateway(root, gateway_binary, tmp_path):
    """CDR (rclpy objects back) and a typed struct (iox.Type matched field by field
    against geometry_msgs/msg/Point) from an rclpy talker, through iox-ros2."""
    point = iox.Type("Point", np.dtype([("x", np.float64), ("y", np.float64), ("z", np.float64)], align=True))
    # Room for all five: the gateway may publish them before this test reads any.
    typed = (iox.Service("point/in", root=root).publish_subscribe(point).subscriber_buffer(8)
             .attribute("ros2/type", "geometry_msgs/msg/Point").create())
    typed_sub = typed.subscriber()
    done = tmp_path / "done"
    py = sys.executable
    proc = in_netns(root, (
        f"{gateway_binary} --ros-prefix {sys.prefix} --root {root} --import '**' --status-interval 0 & G=$!; "
        f"{py} {PEER} talk-string --transient --count 5 --until {done} & A=$!; "
        f"{py} {PEER} talk-point --topic /point/in --transient --count 5 --until {done} & B=$!; "
        "wait $A $B; kill -TERM $G; wait $G"))
    try:
        chatter = wait_open(lambda: iox.Service("chatter", root=root).publish_subscribe()
                            .require_attribute("ros2/type", "std_msgs/msg/String").open())
        sub = chatter.subscriber()
        texts = []
        end = time.monotonic() + 60
        while len(texts) < 5 and time.monotonic() < end:
            s = sub.receive(timeout=0.1)
            if s is not None:
                texts.append(iox.ros2.to_message(s, iox.ros2.message_class(chatter)).data)
                del s
        assert texts == [f"hello {i}" for i in range(5)]
        points = []
        while len(points) < 5 and time.monotonic() < end:
            s = typed_sub.receive(timeout=0.1)
            if s is not None:
                v = s.array
                points.append((float(v["x"]), float(v["y"]), float(v["z"])))
                del v, s
        assert points == [(float(i), 2.0 * i, -0.5 * i) for i in range(5)]
    except BaseException:
        done.write_text("")
        proc.kill()
        print(proc.communicate()[0])
        raise
    done.write_text("")
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out


def test_rclpy_loads_in_a_process_that_used_iox_first(tmp_path):
    """A process that used iox (a sample sent and received), then loads rclpy's
    extension, in a fresh /dev/shm as in any container: loading it runs lttng-ust's
    constructor, which forks from lttng's listener thread while the loading thread
    holds the loader's lock, so iox's fork handlers run in that thread then (they once
    registered a thread-local's destructor there, which waits for the loader's lock:
    the process hung for good, 15 of 15 runs). Five fresh processes here, each bounded."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        if os.environ.get("IOX_REQUIRE_ROS") == "1":
            raise RuntimeError("a fresh /dev/shm (a mount namespace) needs root and unshare")
        pytest.skip("a fresh /dev/shm (a mount namespace) needs root and unshare (util-linux)")
    script = textwrap.dedent(f"""
        import numpy as np, iox
        svc = iox.Service("fork/rclpy", root={str(tmp_path)!r}).publish_subscribe(np.uint64).open_or_create()
        sub, pub = svc.subscriber(), svc.publisher()
        assert pub.send(np.uint64(7)) == 1 and int(sub.receive().array) == 7
        import rclpy.serialization  # loads _rclpy_pybind11, and lttng-ust with it
        from std_msgs.msg import String
        assert rclpy.serialization.deserialize_message(
            rclpy.serialization.serialize_message(String(data="ok")), String).data == "ok"
        print("loaded")
    """)
    # A private tmpfs on /dev/shm: lttng-ust finds none of its files and forks to make them.
    fresh_shm = 'mount -t tmpfs tmpfs /dev/shm && exec "$0" -c "$1"'
    for run in range(5):
        try:
            done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", fresh_shm,
                                   sys.executable, script], capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail(f"run {run}: the process hung loading rclpy after using iox")
        assert done.returncode == 0 and done.stdout.strip() == "loaded", (run, done.stdout, done.stderr)


# --- ROS 2 services through the gateway, served or called from Python -----------------

def test_a_python_client_calls_an_rclpy_service_through_the_gateway(root, gateway_binary, tmp_path):
    """rclpy serves std_srvs/srv/Trigger; the gateway imports it as an iox
    request-response service of CDR bytes; a Python client calls it."""
    from std_srvs.srv import Trigger
    done = tmp_path / "done"
    proc = in_netns(root, (
        f"{gateway_binary} --ros-prefix {sys.prefix} --root {root} --import-service '**' --status-interval 0 & G=$!; "
        f"{sys.executable} {PEER} serve-trigger --service /reset --until {done}; a=$?; "
        "kill -TERM $G; wait $G; exit $a"))
    try:
        svc = wait_open(lambda: iox.Service("reset", root=root).request_response(bytes, bytes)
                        .require_attribute("ros2/type", "std_srvs/srv/Trigger").open())
        assert iox.ros2.message_class(svc) is Trigger
        # The gateway makes the service, then its server (as rclpy's wait_for_service).
        end = time.monotonic() + 60
        while svc.port_counts()[1] < 1:
            assert time.monotonic() < end and proc.poll() is None, "the gateway's server never connected"
            time.sleep(0.01)
        client = svc.client()
        for n in (1, 2, 3):
            pending = iox.ros2.send_message(client, Trigger.Request())
            answer = iox.ros2.to_message(pending.receive(timeout=60.0), Trigger.Response)
            assert (answer.success, answer.message) == (True, f"reset {n}")
        # Bytes that are no Trigger request: refused by the gateway, the stream ends empty.
        with pytest.raises(iox.Error, match="without a response"):
            client.call(b"\x07\x07", timeout=60.0)
    finally:
        done.write_text("")
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out


def test_an_rclpy_client_calls_a_python_server_through_the_gateway(root, gateway_binary):
    """A Python server of std_srvs/srv/SetBool (CDR bytes both ways); the gateway
    exports it as a ROS service; an rclpy client calls it twice."""
    from std_srvs.srv import SetBool
    svc = (iox.Service("set_led", root=root)
           .request_response(bytes, bytes, request_max_len=4096, response_max_len=4096)
           .attribute("ros2/type", "std_srvs/srv/SetBool").create())
    server = svc.server()
    proc = in_netns(root, (
        f"{gateway_binary} --ros-prefix {sys.prefix} --root {root} --export-service '**' --status-interval 0 & G=$!; "
        f"{sys.executable} {PEER} call-setbool --service /set_led; a=$?; kill -TERM $G; wait $G; exit $a"))
    try:
        for expected in (True, False):
            req = server.receive(timeout=60.0)
            assert req is not None, "no request from rclpy through the gateway within 60 s"
            with req:
                on = iox.ros2.to_message(req, SetBool.Request).data
                assert on is expected
                iox.ros2.respond(req, SetBool.Response(success=on, message="led on" if on else "led off"))
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, out
    assert [line for line in out.splitlines() if line.startswith(("True", "False"))] == [
        "True led on", "False led off"], out


# --- One line for a node's hot topic: iox.ros2.Publisher and Subscription ------------

def _peer():
    """The gateway tests' rclpy peer as a module: its images and clouds."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("ros_peer", PEER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _image(seq, size):
    """The image the gateway tests' rclpy talker sends: 1024 rows of mono8."""
    m = Image(height=1024, width=size // 1024, step=size // 1024, encoding="mono8",
              data=_peer().pattern(size, seq).tobytes())
    m.header.stamp.sec, m.header.frame_id = seq, "camera"
    return m


def test_one_line_ports_carry_ros_messages_across_processes(tmp_path):
    """Images (published from a message and written in place), point clouds and a
    JointState with empty sequences (CDR) from another process, taken as rclpy
    messages and as views in place."""
    root = str(tmp_path)
    images = iox.ros2.Subscription(Image, "/camera/image", root=root)
    clouds = iox.ros2.Subscription(PointCloud2, "/lidar", root=root)
    joints = iox.ros2.Subscription(JointState, "joints", root=root)
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        import numpy as np, iox
        from sensor_msgs.msg import Image, JointState, PointCloud2
        from test_ros2 import _image, _peer
        root = {root!r}
        img = iox.ros2.Publisher(Image, "camera/image", root=root)
        cloud = iox.ros2.Publisher(PointCloud2, "lidar", root=root)
        joint = iox.ros2.Publisher(JointState, "/joints", root=root)
        assert img.publish(_image(0, 1 << 20)) == 1
        loan = img.loan_image(1024, 1024, "mono8", frame_id="camera", sec=1)
        iox.ros2.image_view(loan)[:] = _peer().pattern(1 << 20, 1).reshape(1024, 1024)
        assert loan.send() == 1
        assert cloud.publish(_peer().cloud(3, 4096)) == 1
        assert joint.publish(JointState(name=["elbow"], position=[0.5])) == 1
        print("sent", flush=True)
    """)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0 and out.strip() == "sent", err
    assert images.take(timeout=5) == _image(0, 1 << 20)
    view = images.take(timeout=5, in_place=True)
    assert (view.header.stamp.sec, view.encoding, view.header.frame_id) == (1, "mono8", "camera")
    assert not view.data.flags.writeable and view.pixels().shape == (1024, 1024)
    assert np.array_equal(view.data, _peer().pattern(1 << 20, 1))
    assert view.to_message() == _image(1, 1 << 20)
    del view
    assert clouds.take(timeout=5) == _peer().cloud(3, 4096)
    j = joints.take(timeout=5)
    assert (list(j.name), list(j.position), list(j.velocity), list(j.effort)) == (["elbow"], [0.5], [], [])
    assert images.take() is None
    with pytest.raises(TypeError, match="not sensor_msgs/msg/Image"):
        iox.ros2.Publisher(Image, "camera/image", root=root).publish(String(data="x"))
    with pytest.raises(TypeError, match="carries sensor_msgs/msg/JointState"):
        iox.ros2.Subscription(String, "joints", root=root)


def test_one_line_publisher_reaches_rclpy_through_the_gateway(root, gateway_binary, tmp_path):
    """A node's hot topic moved to iox in one line stays a ROS topic: the gateway
    exports the images and clouds a Python iox.ros2.Publisher sends, and rclpy
    listeners get them whole (transient local: they join when they like)."""
    images = iox.ros2.Publisher(Image, "/camera/image", transient_local=True, root=root)
    clouds = iox.ros2.Publisher(PointCloud2, "/lidar", transient_local=True, root=root)
    py = sys.executable
    proc = in_netns(root, (
        f"{gateway_binary} --ros-prefix {sys.prefix} --root {root} --export '**' --status-interval 0 & G=$!; "
        f"{py} {PEER} listen-image --topic /camera/image --transient --count 3 & A=$!; "
        f"{py} {PEER} listen-cloud --topic /lidar --transient --count 2 & B=$!; "
        "wait $A; a=$?; wait $B; b=$?; kill -TERM $G; wait $G; exit $((a | b))"))
    # Once the gateway subscribes (it keeps what it is sent for ROS's late joiners).
    end = time.monotonic() + 60
    while min(images.get_subscription_count(), clouds.get_subscription_count()) < 1:
        assert time.monotonic() < end and proc.poll() is None, "the gateway never subscribed"
        time.sleep(0.01)
    for seq in range(3):
        images.publish(_image(seq, 1 << 20))
    for seq in range(2):
        clouds.publish(_peer().cloud(seq, 4096))
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    assert sorted(line for line in out.splitlines() if line.startswith(("image", "cloud"))) == [
        "cloud 0 4096", "cloud 1 4096", "image 0 1048576", "image 1 1048576", "image 2 1048576"], out


def test_rclpy_images_reach_a_one_line_subscription_through_the_gateway(root, gateway_binary, tmp_path):
    """The other way: an rclpy camera's images, imported by the gateway, taken by a
    Python iox.ros2.Subscription as rclpy messages."""
    done = tmp_path / "done"
    py = sys.executable
    proc = in_netns(root, (
        f"{gateway_binary} --ros-prefix {sys.prefix} --root {root} --import '**' --status-interval 0 & G=$!; "
        f"{py} {PEER} talk-image --topic /camera/image --transient --sizes 1048576 1048576 --until {done}; "
        "a=$?; kill -TERM $G; wait $G; exit $a"))
    try:
        wait_open(lambda: iox.Service("camera/image", root=root).publish_subscribe()
                  .require_attribute("ros2/type", "sensor_msgs/msg/Image").open())
        sub = iox.ros2.Subscription(Image, "/camera/image", root=root)
        got = []
        end = time.monotonic() + 60
        while len(got) < 2 and time.monotonic() < end:
            m = sub.take(timeout=0.1)
            if m is not None:
                got.append(m)
        assert got == [_image(0, 1 << 20), _image(1, 1 << 20)]
    finally:
        done.write_text("")
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out


def test_image_headers_know_their_encodings_and_byte_order(tmp_path):
    """A step is derived only for encodings iox knows the pixel size of; a big-endian
    image's multi-byte pixels are viewed in that order."""
    with pytest.raises(ValueError, match="give step="):
        iox.ros2.image_header(2, 2, "yuv422_yuy2")
    assert int(iox.ros2.image_header(2, 2, "yuv422_yuy2", step=4)["step"]) == 4
    assert int(iox.ros2.image_header(2, 3, "32FC3")["step"]) == 36
    svc = (iox.Service("camera/be", root=str(tmp_path))
           .publish_subscribe(bytes, max_len=64, user_header=iox.ros2.IMAGE_HEADER).create())
    sub, pub = svc.subscriber(), svc.publisher()
    pub.send(np.array([0, 1, 0, 2], np.uint8), header=iox.ros2.image_header(1, 2, "mono16", is_bigendian=True))
    assert iox.ros2.image_view(sub.receive()).tolist() == [[1, 2]]
