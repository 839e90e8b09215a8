"""The ROS 2 side of the gateway's tests: rclpy nodes (the real ROS 2 from the test
venv, Fast DDS) that publish and check what the tests send through the gateway.

Payload pattern of images: byte i of image `seq` is (7 i + seq) mod 256, as in the
Rust side of the tests. Prints one line per message checked; exits 0 when every
expected message came, 1 otherwise (with the reason on stderr).
"""
import argparse
import os
import sys
import time

import numpy as np
import rclpy
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from geometry_msgs.msg import Point
from sensor_msgs.msg import Image
from std_msgs.msg import String


def qos(args):
    return QoSProfile(
        depth=args.depth,
        reliability=ReliabilityPolicy.BEST_EFFORT if args.best_effort else ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.TRANSIENT_LOCAL if args.transient else DurabilityPolicy.VOLATILE,
    )


def pattern(n, seq):
    return ((np.arange(n, dtype=np.uint64) * 7 + seq) & 0xFF).astype(np.uint8)


def spin_until(node, done, timeout):
    end = time.monotonic() + timeout
    while not done() and time.monotonic() < end:
        rclpy.spin_once(node, timeout_sec=0.05)
    return done()


def hold(node, args):
    """Keeps the publisher (and its transient-local history) alive until told to stop."""
    end = time.monotonic() + args.timeout
    while args.until and not os.path.exists(args.until) and time.monotonic() < end:
        rclpy.spin_once(node, timeout_sec=0.05)


def wait_for_subscribers(node, pub, args):
    if args.wait_subscribers:
        spin_until(node, lambda: pub.get_subscription_count() >= args.wait_subscribers, args.timeout)


def talk_string(node, args):
    pub = node.create_publisher(String, args.topic, qos(args))
    wait_for_subscribers(node, pub, args)
    for i in range(args.count):
        m = String()
        m.data = f"hello {i}"
        pub.publish(m)
        time.sleep(args.period)
    hold(node, args)


def talk_point(node, args):
    pub = node.create_publisher(Point, args.topic, qos(args))
    wait_for_subscribers(node, pub, args)
    for i in range(args.count):
        pub.publish(Point(x=float(i), y=2.0 * i, z=-0.5 * i))
        time.sleep(args.period)
    hold(node, args)


def cloud(seq, points):
    """A PointCloud2 of `points` x, y, z, intensity float32 points; point i of cloud
    `seq` is (i, seq, -i, 0.5)."""
    from sensor_msgs.msg import PointCloud2, PointField
    data = np.zeros((points, 4), np.float32)
    data[:, 0] = np.arange(points)
    data[:, 1] = seq
    data[:, 2] = -np.arange(points)
    data[:, 3] = 0.5
    fields = [PointField(name=n, offset=4 * i, datatype=PointField.FLOAT32, count=1)
              for i, n in enumerate(["x", "y", "z", "intensity"])]
    m = PointCloud2(height=1, width=points, fields=fields, is_bigendian=False, point_step=16,
                    row_step=16 * points, data=data.tobytes(), is_dense=True)
    m.header.stamp.sec = seq
    m.header.frame_id = "lidar"
    return m


def talk_cloud(node, args):
    from sensor_msgs.msg import PointCloud2
    pub = node.create_publisher(PointCloud2, args.topic, qos(args))
    wait_for_subscribers(node, pub, args)
    for seq in range(args.count):
        pub.publish(cloud(seq, 4096))
        time.sleep(args.period)
    hold(node, args)


def check_cloud(i, msg):
    want = cloud(i, msg.width)
    assert [(f.name, f.offset, f.datatype, f.count) for f in msg.fields] == \
        [(f.name, f.offset, f.datatype, f.count) for f in want.fields], msg.fields
    assert (msg.header.frame_id, msg.header.stamp.sec, msg.is_dense, msg.point_step) == ("lidar", i, True, 16)
    assert bytes(msg.data) == bytes(want.data), f"cloud {i}: points differ"
    print(f"cloud {i} {msg.width}")


def talk_raw(node, args):
    """Malformed messages first (short, wrong encapsulation, a length past the end),
    then one good one."""
    pub = node.create_publisher(String, args.topic, qos(args))
    wait_for_subscribers(node, pub, args)
    for raw in [b"\x00\x01", b"\x07\x07\x00\x00\x03\x00\x00\x00ab\x00\x00", b"\x00\x01\x00\x00\xff\x00\x00\x00ab\x00\x00"]:
        pub.publish(raw)
        time.sleep(args.period)
    m = String()
    m.data = "good"
    pub.publish(m)
    hold(node, args)


def talk_image(node, args):
    pub = node.create_publisher(Image, args.topic, qos(args))
    wait_for_subscribers(node, pub, args)
    for seq, size in enumerate(args.sizes):
        m = Image()
        m.header.stamp.sec = seq
        m.header.frame_id = "camera"
        m.height = 1024
        m.width = size // 1024
        m.step = m.width
        m.encoding = "mono8"
        m.data = pattern(size, seq).tobytes()
        pub.publish(m)
        time.sleep(args.period)
    hold(node, args)


def call_setbool(node, args):
    """Calls a SetBool service with True, then False; prints each answer."""
    from std_srvs.srv import SetBool
    client = node.create_client(SetBool, args.service)
    if not client.wait_for_service(timeout_sec=args.timeout):
        print(f"no {args.service} server", file=sys.stderr)
        return 1
    for value in [True, False]:
        future = client.call_async(SetBool.Request(data=value))
        if not spin_until(node, future.done, args.timeout):
            print(f"no answer from {args.service}", file=sys.stderr)
            return 1
        r = future.result()
        print(f"{r.success} {r.message}")
    return 0


def serve_trigger(node, args):
    """Serves a Trigger service (answer: success, "reset N") until told to stop."""
    from std_srvs.srv import Trigger
    count = [0]

    def on(_request, response):
        count[0] += 1
        response.success = True
        response.message = f"reset {count[0]}"
        return response

    node.create_service(Trigger, args.service, on)
    hold(node, args)
    return 0


def listen(node, args, msg_type, check):
    got = []

    def on(msg):
        got.append(msg)

    node.create_subscription(msg_type, args.topic, on, qos(args))
    if not spin_until(node, lambda: len(got) >= args.count, args.timeout):
        print(f"got {len(got)} of {args.count} messages on {args.topic}", file=sys.stderr)
        return 1
    for i, msg in enumerate(got):
        check(i, msg)
    sys.stdout.flush()
    return 0


def check_string(i, msg):
    assert msg.data == f"hello {i}", (i, msg.data)
    print(msg.data)


def check_point(i, msg):
    assert (msg.x, msg.y, msg.z) == (float(i), 2.0 * i, -0.5 * i), (i, msg)
    print(f"point {msg.x} {msg.y} {msg.z}")


def check_image(i, msg):
    data = np.frombuffer(msg.data, dtype=np.uint8)
    assert msg.header.stamp.sec == i, (i, msg.header.stamp.sec)
    assert msg.header.frame_id == "camera" and msg.encoding == "mono8", (msg.header.frame_id, msg.encoding)
    assert msg.height * msg.step == len(data), (msg.height, msg.step, len(data))
    assert np.array_equal(data, pattern(len(data), i)), f"image {i}: pixels differ"
    print(f"image {i} {len(data)}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("command", choices=[
            "talk-string", "talk-raw", "talk-image", "talk-point", "talk-cloud",
            "listen-string", "listen-image", "listen-point", "listen-cloud",
            "call-setbool", "serve-trigger", "wait-node",
        ])
    p.add_argument("--topic", default="/chatter")
    p.add_argument("--service", default="/set_led")
    p.add_argument("--count", type=int, default=10)
    p.add_argument("--sizes", type=int, nargs="*", default=[])
    p.add_argument("--depth", type=int, default=10)
    p.add_argument("--transient", action="store_true")
    p.add_argument("--best-effort", action="store_true")
    p.add_argument("--period", type=float, default=0.001)
    p.add_argument("--until", help="publishers stay until this file exists")
    p.add_argument("--wait-subscribers", type=int, default=0)
    p.add_argument("--timeout", type=float, default=60)
    p.add_argument("--node", help="wait-node: the node name (namespace/name) to wait for")
    args = p.parse_args()
    rclpy.init()
    node = rclpy.create_node("peer")
    try:
        if args.command == "talk-string":
            talk_string(node, args)
        elif args.command == "talk-raw":
            talk_raw(node, args)
        elif args.command == "talk-image":
            talk_image(node, args)
        elif args.command == "talk-point":
            talk_point(node, args)
        elif args.command == "talk-cloud":
            talk_cloud(node, args)
        elif args.command == "listen-cloud":
            from sensor_msgs.msg import PointCloud2
            return listen(node, args, PointCloud2, check_cloud)
        elif args.command == "call-setbool":
            return call_setbool(node, args)
        elif args.command == "serve-trigger":
            return serve_trigger(node, args)
        elif args.command == "wait-node":
            seen = lambda: {f"{ns.rstrip('/')}/{n}" for n, ns in node.get_node_names_and_namespaces()}
            if not spin_until(node, lambda: args.node in seen(), args.timeout):
                print(f"no node {args.node}; nodes: {sorted(seen())}", file=sys.stderr)
                return 1
            print(args.node)
        elif args.command == "listen-point":
            return listen(node, args, Point, check_point)
        elif args.command == "listen-string":
            return listen(node, args, String, check_string)
        else:
            return listen(node, args, Image, check_image)
        return 0
    finally:
        node.destroy_node()
        rclpy.shutdown()


if __name__ == "__main__":
    sys.exit(main())
